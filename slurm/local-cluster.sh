#!/usr/bin/env bash
# A one-machine SLURM cluster from Debian's packages, to try the `slurm` profile (and to test it in
# CI): munged, slurmctld and one slurmd, which declares more CPUs than the machine has (so that a
# study's largest MPI run can start), a RealMemory the machine has, and GPUs as generic resources
# without devices (the ranks then find no CUDA and train on the CPU).
#   slurm/local-cluster.sh start [CPUS] [GPUS]   (as root; installs slurm-wlm and munge if missing)
#   slurm/local-cluster.sh stop
set -euo pipefail
conf=/etc/slurm/slurm.conf  # srun's job steps lose SLURM_CONF, so the file must sit where they look

stop() {
  pkill -x slurmd || true
  pkill -x slurmctld || true
  pkill -x slurmstepd || true
  pkill -x munged || true
  for _ in $(seq 50); do  # the daemons gone before new ones bind their ports
    pgrep -x slurmctld > /dev/null || pgrep -x slurmd > /dev/null || pgrep -x munged > /dev/null \
      || return 0
    sleep 0.2
  done
}

start() {
  local cpus=${1:-16} gpus=${2:-8}
  if ! command -v slurmctld > /dev/null || ! command -v munged > /dev/null; then
    apt-get update -q && apt-get install -y -q --no-install-recommends slurm-wlm munge
  fi
  stop
  install -d -o munge -g munge -m 0755 /run/munge
  [ -s /etc/munge/munge.key ] || runuser -u munge -- mungekey --create
  runuser -u munge -- /usr/sbin/munged
  munge -n | unmunge > /dev/null  # munge works: a credential round trip, not just a process

  local host memory
  host=$(hostname -s)
  memory=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 * 9 / 10 ))
  install -d /etc/slurm /var/spool/slurmctld /var/spool/slurmd /var/log/slurm
  # daemons talk over loopback, so the machine's name need not resolve
  cat > "$conf" <<CONF
ClusterName=local
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
AuthType=auth/munge
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU_Memory
MpiDefault=none
ReturnToService=2
# without slurmdbd the workflow asks squeue, which forgets a job MinJobAge seconds after its end
MinJobAge=300
JobRequeue=1
GresTypes=gpu
SlurmdParameters=config_overrides
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$memory Gres=gpu:$gpus State=UNKNOWN
PartitionName=local Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
CONF
  # SLURM keeps a GPU only with a device file: copies of /dev/null stand in for them
  install -d /var/spool/slurmd/gpus
  for ((i = 0; i < gpus; i++)); do
    [ -c "/var/spool/slurmd/gpus/nvidia$i" ] || mknod "/var/spool/slurmd/gpus/nvidia$i" c 1 3
  done
  echo "Name=gpu File=/var/spool/slurmd/gpus/nvidia[0-$((gpus - 1))]" > /etc/slurm/gres.conf
  # a cold start: jobs of an earlier cluster on this machine (one killed with it, or a machine
  # image taken while it ran) would otherwise be recovered and hold the node
  slurmctld -c
  slurmd
  scontrol update nodename="$host" state=resume 2> /dev/null || true  # a drain left by an earlier start
  for _ in $(seq 30); do
    sinfo -h -o %T 2> /dev/null | grep -qx idle && { sinfo; return; }
    sleep 1
  done
  echo "slurmd did not come up:" >&2
  sinfo >&2 || true
  tail -n 20 /var/log/slurm/slurmctld.log /var/log/slurm/slurmd.log >&2
  exit 1
}

case ${1:-} in
  start) shift; start "$@" ;;
  stop) stop ;;
  *) echo "usage: $0 start [CPUS] [GPUS] | stop" >&2; exit 2 ;;
esac
