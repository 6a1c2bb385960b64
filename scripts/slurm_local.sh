#!/bin/bash
# A one-node SLURM on this machine, for the study's cluster tests (tests/test_slurm.py) and for trying
# `executor: slurm` by hand: installs slurm-wlm and munge with apt-get where they are missing (root
# only), writes a slurm.conf for this host from `slurmd -C`, and starts munged, slurmctld and slurmd.
# Idempotent: a cluster that answers `sinfo` already is left as it is. Exit 0 once the node is idle;
# non-zero with the reason otherwise (the tests then skip, naming it).
#   bash scripts/slurm_local.sh          # install if needed, start
#   bash scripts/slurm_local.sh --stop   # stop the daemons
# No slurmdbd: sacct is off, so the study learns a job's fate from squeue and its own markers
# (encoderlab/study/slurm.py).
set -u
CONF=/etc/slurm/slurm.conf
if [ "${1:-}" = "--stop" ]; then
  pkill -x slurmd; pkill -x slurmctld; pkill -x munged; exit 0
fi
if timeout 5 sinfo -h >/dev/null 2>&1 && sinfo -h -o %t | grep -qE 'idle|mix|alloc'; then
  echo "slurm: already up ($(sinfo -h -o '%P %D %t' | head -1))"; exit 0
fi
if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
  if [ "$(id -u)" != 0 ]; then echo "slurm: slurm-wlm and munge are not installed, and installing them needs root"; exit 3; fi
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm munge) >/tmp/slurm-install.log 2>&1 \
    || { echo "slurm: apt-get install slurm-wlm munge failed (see /tmp/slurm-install.log)"; tail -5 /tmp/slurm-install.log; exit 4; }
fi
if [ "$(id -u)" != 0 ]; then echo "slurm: starting the daemons needs root"; exit 3; fi
mkdir -p /etc/slurm /var/spool/slurmctld /var/spool/slurmd /var/log/slurm /run/slurm /run/munge /var/lib/munge /var/log/munge
if [ ! -s /etc/munge/munge.key ]; then
  mkdir -p /etc/munge && dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key 2>/dev/null
fi
chown -R munge:munge /etc/munge /run/munge /var/lib/munge /var/log/munge 2>/dev/null
chmod 700 /etc/munge; chmod 400 /etc/munge/munge.key
NODE=$(slurmd -C | head -1 | sed 's/ UpTime.*//')
HOST=$(hostname -s)
cat > $CONF <<CONF
# written by encoderlab's scripts/slurm_local.sh: one node, this host
ClusterName=encoderlab
SlurmctldHost=$HOST
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=1024
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SlurmctldPidFile=/run/slurm/slurmctld.pid
SlurmdPidFile=/run/slurm/slurmd.pid
SlurmdSpoolDir=/var/spool/slurmd
StateSaveLocation=/var/spool/slurmctld
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
KillWait=30
MinJobAge=300
$NODE NodeAddr=127.0.0.1 State=UNKNOWN
PartitionName=debug Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
CONF
pgrep -x munged >/dev/null || runuser -u munge -- /usr/sbin/munged || { echo "slurm: munged did not start"; exit 5; }
pgrep -x slurmctld >/dev/null || slurmctld || { echo "slurm: slurmctld did not start (/var/log/slurm/slurmctld.log)"; exit 5; }
pgrep -x slurmd >/dev/null || slurmd || { echo "slurm: slurmd did not start (/var/log/slurm/slurmd.log)"; exit 5; }
for _ in $(seq 60); do
  if sinfo -h -o %t 2>/dev/null | grep -qE 'idle|mix|alloc'; then echo "slurm: up ($(sinfo -h -o '%P %D %c CPUs %t' | head -1))"; exit 0; fi
  sinfo -h -o %t 2>/dev/null | grep -q drain && scontrol update nodename=$HOST state=resume 2>/dev/null
  sleep 1
done
echo "slurm: the node did not come up idle: $(sinfo -h 2>&1 | head -2)"; tail -5 /var/log/slurm/slurmctld.log /var/log/slurm/slurmd.log 2>/dev/null
exit 6
