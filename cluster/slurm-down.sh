#!/usr/bin/env bash
# Stop exactly the daemons cluster/slurm-up.sh started, by their PID files; nothing else.
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
