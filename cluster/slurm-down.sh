#!/usr/bin/env bash
# Stop exactly the daemons cluster/slurm-up.sh started, by their PID files, and unlink its configs; nothing else.
set -uo pipefail
DIR=${TOKENWATT_SLURM_DIR:-/tmp/tokenwatt-slurm}
for name in slurmd slurmctld munged; do
  pidfile="$DIR/run/$name.pid"
  [ -f "$pidfile" ] || continue
  pid=$(cat "$pidfile")
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid"
    for _ in $(seq 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
    echo "slurm-down: stopped $name (pid $pid)" >&2
  fi
  rm -f "$pidfile"
done
# Unlink the configs slurm-up.sh linked into /etc/slurm (ours only). Left behind, they point
# every SLURM client at a controller that is gone, and the executor plugin runs
# `scontrol show config` whenever Snakemake starts, even for local runs: ~9 s of retries each time.
for f in slurm.conf cgroup.conf gres.conf; do
  target=/etc/slurm/$f
  if [ -L "$target" ] && [ "$(readlink "$target")" = "$DIR/$f" ]; then
    rm -f "$target"
  fi
done
