#!/usr/bin/env bash
# Bring up a single-node SLURM cluster on this machine (loopback only) for tests and trials:
# munge + slurmctld + slurmd from Debian's packages, no accounting database, two fake GPUs of two
# types (gres gpu:a100 and gpu:h100, backed by /dev/null and /dev/zero) so GPU requests, and GPU
# model requests, schedule. Needs root.
#
#   cluster/slurm-up.sh      # then sbatch/squeue/snakemake --profile profiles/slurm --workflow-profile none work
#   cluster/slurm-down.sh    # stops exactly the daemons this script started
#
# State (configs, PID files, logs, spool) lives in $TOKENWATT_SLURM_DIR (default
# /tmp/tokenwatt-slurm). The configs are linked into /etc/slurm: the executor plugin's job
# step drops SLURM_* variables (SLURM_CONF too) before its inner srun, so only the default
# location works. An /etc/slurm/slurm.conf that is not ours is never touched: we fail instead.
set -euo pipefail
DIR=${TOKENWATT_SLURM_DIR:-/tmp/tokenwatt-slurm}
PARTITION=${TOKENWATT_SLURM_PARTITION:-main}
log() { echo "slurm-up: $*" >&2; }
fail() { echo "slurm-up: FAILED: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || fail "must run as root (it starts munged, slurmctld and slurmd)"

if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null || ! command -v sbatch >/dev/null || ! command -v munged >/dev/null; then
  log "installing munge and slurm from Debian's packages"
  # No init system here: a policy-rc.d that refuses keeps the packages from starting services.
  printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
  trap 'rm -f /usr/sbin/policy-rc.d' EXIT
  apt-get update -qq >&2 || fail "apt-get update failed"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends munge slurmctld slurmd slurm-client >&2 \
    || fail "apt-get install munge slurmctld slurmd slurm-client failed"
  rm -f /usr/sbin/policy-rc.d
  trap - EXIT
fi

mkdir -p "$DIR"/{spool/ctld,spool/d,log,run,munge}
chmod 700 "$DIR/munge"
HOST=$(hostname -s)
CPUS=$(nproc)
MEM_MB=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 * 9 / 10 ))

# munge: our own daemon, key and socket, so nothing system-wide is touched.
[ -f "$DIR/munge/munge.key" ] || { dd if=/dev/urandom of="$DIR/munge/munge.key" bs=1024 count=1 status=none; chmod 400 "$DIR/munge/munge.key"; }
SOCKET="$DIR/munge/munge.socket"

cat > "$DIR/slurm.conf" <<CONF
ClusterName=tokenwatt
SlurmctldHost=$HOST(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$SOCKET
CredType=cred/munge
SlurmctldPort=${TOKENWATT_SLURMCTLD_PORT:-16817}
SlurmdPort=${TOKENWATT_SLURMD_PORT:-16818}
StateSaveLocation=$DIR/spool/ctld
SlurmdSpoolDir=$DIR/spool/d
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=1024
# Without accounting, finished jobs are known only while slurmctld keeps them; keep them
# well beyond 3x the executor plugin's status-check wait.
MinJobAge=600
ReturnToService=2
SchedulerType=sched/backfill
GresTypes=gpu
NodeName=$HOST NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=$MEM_MB Gres=gpu:a100:1,gpu:h100:1 State=UNKNOWN
PartitionName=$PARTITION Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
CONF
echo "# written by tokenwatt cluster/slurm-up.sh" >> "$DIR/slurm.conf"
# slurmd loads a cgroup plugin whatever ProctrackType says; the autodetected one dies in containers.
printf 'CgroupPlugin=cgroup/v1\nIgnoreSystemd=yes\n' > "$DIR/cgroup.conf"
# Two fake GPUs of two types (gres with no hardware behind them), so a job that asks for a GPU
# model lands on that type: jobs get CUDA_VISIBLE_DEVICES=0 or 1.
printf 'AutoDetect=off\nName=gpu Type=a100 File=/dev/null\nName=gpu Type=h100 File=/dev/zero\n' > "$DIR/gres.conf"

mkdir -p /etc/slurm
for f in slurm.conf cgroup.conf gres.conf; do
  target=/etc/slurm/$f
  if [ -e "$target" ] && ! { [ -L "$target" ] && [ "$(readlink "$target")" = "$DIR/$f" ]; }; then
    fail "$target exists and is not tokenwatt's; this machine already has a SLURM configuration (use its cluster, or move it away)"
  fi
  ln -sfn "$DIR/$f" "$target"
done

start() {  # name pidfile command...
  local name=$1 pidfile=$2; shift 2
  if [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then log "$name already running (pid $(cat "$pidfile"))"; return; fi
  "$@" || fail "$name did not start; see $DIR/log"
}
start munged "$DIR/run/munged.pid" munged --socket="$SOCKET" --key-file="$DIR/munge/munge.key" --pid-file="$DIR/run/munged.pid" \
  --log-file="$DIR/log/munged.log" --seed-file="$DIR/munge/munge.seed" --force
start slurmctld "$DIR/run/slurmctld.pid" slurmctld
start slurmd "$DIR/run/slurmd.pid" slurmd

for _ in $(seq 60); do
  state=$(sinfo -h -N -o %t 2>/dev/null | head -n1 || true)
  case "$state" in idle|mix|alloc) log "node $HOST is $state; partition $PARTITION ready"; exit 0 ;; esac
  sleep 1
done
fail "node never became idle (state '${state:-none}'); last slurmctld/slurmd log lines:
$(tail -n 5 "$DIR/log/slurmctld.log" 2>/dev/null)
$(tail -n 5 "$DIR/log/slurmd.log" 2>/dev/null)"
