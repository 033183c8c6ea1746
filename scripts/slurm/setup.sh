#!/usr/bin/env bash
# A real one-node Slurm cluster on this machine, from Debian's packages: munge for authentication,
# slurmctld (the controller) and slurmd (the node) on localhost. Needs root. Idempotent: running it
# again rewrites the config and restarts the daemons.
#   bash scripts/slurm/setup.sh && sinfo
set -euo pipefail
if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q slurm-wlm munge >/dev/null
fi
host=$(hostname -s)
cpus=$(nproc)
mem_mb=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 - 1024 ))
mkdir -p /etc/slurm /var/spool/slurmctld /var/spool/slurmd /var/log/slurm /run/munge
# no cgroups (containers often lack them): processes tracked by /proc, tasks not bound
cat > /etc/slurm/slurm.conf <<CONF
ClusterName=condenser
SlurmctldHost=${host}
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
ReturnToService=2
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
SlurmUser=root
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MaxArraySize=10001
NodeName=${host} CPUs=${cpus} RealMemory=${mem_mb} State=UNKNOWN
PartitionName=main Nodes=${host} Default=YES MaxTime=INFINITE State=UP
CONF
[ -s /etc/munge/munge.key ] || /usr/sbin/mungekey --create 2>/dev/null || \
  dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key 2>/dev/null
chown munge:munge /etc/munge/munge.key /run/munge 2>/dev/null || true
chmod 400 /etc/munge/munge.key
pkill -x slurmd || true
pkill -x slurmctld || true
pkill -x munged || true
sleep 1
su -s /bin/sh munge -c /usr/sbin/munged 2>/dev/null || /usr/sbin/munged --force
/usr/sbin/slurmctld
/usr/sbin/slurmd
for _ in $(seq 30); do
  if sinfo -h -o %T 2>/dev/null | grep -qE 'idle|mixed|allocated'; then
    sinfo
    exit 0
  fi
  sleep 1
done
echo "slurm did not come up; see /var/log/slurm/" >&2
exit 1
