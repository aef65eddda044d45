#!/usr/bin/env bash
# A real two-node Slurm cluster on this one machine, for the Slurm backend's tests and for trying
# `launch.backend: slurm` without a cluster: munged, one slurmctld and two slurmd (`-N node1`,
# `-N node2`) on their own ports, both nodes on this host (NodeAddr 127.0.0.1), in one partition
# `debug`. select/cons_tres, proctrack/linuxproc, everything as root (run it with sudo).
#
#   sudo bash scripts/slurm_cluster.sh install   # Debian's slurm-wlm and munge (apt)
#   sudo bash scripts/slurm_cluster.sh start     # install if needed, write slurm.conf, start, wait
#   sudo bash scripts/slurm_cluster.sh stop      # stop the daemons (jobs are cancelled first)
#   bash scripts/slurm_cluster.sh status         # sinfo, or why there is no cluster
#
# It writes /etc/slurm/slurm.conf (the path sbatch, squeue, sacct and scancel read) only when no
# slurm.conf is there or the one there is this script's own (first line below): it never touches a
# real cluster's configuration. There is no accounting daemon (slurmdbd), so `sacct` answers
# nothing; finished jobs stay visible to `scontrol show job` for MinJobAge (one hour).
set -euo pipefail

CONF_DIR=/etc/slurm
CONF=$CONF_DIR/slurm.conf
MARK="# mindtune test cluster (scripts/slurm_cluster.sh)"
STATE=/var/spool/mindtune-slurm
LOGS=/var/log/mindtune-slurm
CTLD_PORT=${MINDTUNE_SLURMCTLD_PORT:-6817}
NODE_PORTS=(${MINDTUNE_SLURMD_PORTS:-6821 6822})
NODES=(node1 node2)
CPUS=$(nproc)
# each node offers half of this machine's memory to jobs (not enforced: memory is not a consumable)
MEM_MB=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 / 2 ))

need_root() {
    if [ "$(id -u)" -ne 0 ]; then
        echo "error: '$1' needs root (it runs Slurm's daemons as root); run: sudo $0 $1" >&2
        exit 1
    fi
}

install() {
    need_root install
    if command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v munged >/dev/null \
        && command -v sbatch >/dev/null; then
        echo "slurm already installed: $(slurmctld -V)"
        return
    fi
    . "$(dirname "$0")/apt_install.sh"
    apt_install slurm-wlm munge
}

write_conf() {
    if [ -f "$CONF" ] && [ "$(head -n1 "$CONF")" != "$MARK" ]; then
        echo "error: $CONF exists and is not this script's; not touching a real cluster's configuration" >&2
        exit 1
    fi
    mkdir -p "$CONF_DIR" "$STATE/ctld" "$LOGS"
    {
        echo "$MARK"
        cat <<EOF
ClusterName=mindtune
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/%n
SlurmctldPidFile=$STATE/slurmctld.pid
SlurmdPidFile=$STATE/slurmd-%n.pid
SlurmctldLogFile=$LOGS/slurmctld.log
SlurmdLogFile=$LOGS/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
MpiDefault=none
ReturnToService=2
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MinJobAge=3600
KillWait=10
SlurmdTimeout=60
InactiveLimit=0
EOF
        for i in "${!NODES[@]}"; do
            echo "NodeName=${NODES[$i]} NodeHostname=$(hostname) NodeAddr=127.0.0.1 Port=${NODE_PORTS[$i]} CPUs=$CPUS RealMemory=$MEM_MB State=UNKNOWN"
        done
        echo "PartitionName=debug Nodes=$(IFS=,; echo "${NODES[*]}") Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4"
    } > "$CONF"
    # the cgroup plugin is not used, but slurmd reads cgroup.conf when it exists: keep it harmless
    [ -f "$CONF_DIR/cgroup.conf" ] || echo "CgroupPlugin=autodetect" > "$CONF_DIR/cgroup.conf"
}

start_munge() {
    if munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1; then
        return
    fi
    [ -s /etc/munge/munge.key ] || { mungekey --create --force 2>/dev/null || dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key 2>/dev/null; }
    chown munge:munge /etc/munge/munge.key && chmod 400 /etc/munge/munge.key
    pgrep -x munged >/dev/null || rm -f /run/munge/munged.pid /run/munge/munge.socket.2*  # left by a kill
    mkdir -p /run/munge /var/log/munge /var/lib/munge
    chown munge:munge /run/munge /var/log/munge /var/lib/munge
    runuser -u munge -- /usr/sbin/munged
}

running() {  # a daemon of this cluster by its command line
    pgrep -f "$1" >/dev/null 2>&1
}

wait_idle() {
    for _ in $(seq 1 60); do
        # both nodes up (idle, mixed or allocated) and none down or not responding
        local states
        states=$(sinfo -h -N -o "%N %t" 2>/dev/null | sort -u || true)
        if [ "$(echo "$states" | grep -cE '^node[12] (idle|mix|alloc)$')" -eq 2 ]; then
            sinfo
            return 0
        fi
        sleep 1
    done
    echo "error: the nodes did not come up; logs in $LOGS" >&2
    sinfo -N -l >&2 || true
    tail -n 20 "$LOGS"/*.log >&2 || true
    return 1
}

start() {
    need_root start
    install
    write_conf
    start_munge
    # a fresh controller forgets the jobs of an earlier, killed cluster (-c)
    running "slurmctld" || /usr/sbin/slurmctld -c -i
    for node in "${NODES[@]}"; do
        running "slurmd -N $node" || /usr/sbin/slurmd -N "$node"
    done
    # nodes that were down (an earlier stop) come back
    scontrol update nodename="$(IFS=,; echo "${NODES[*]}")" state=resume >/dev/null 2>&1 || true
    wait_idle
}

stop() {
    need_root stop
    scancel --partition=debug >/dev/null 2>&1 || true
    pkill -f "slurmd -N node" 2>/dev/null || true
    pkill -x slurmctld 2>/dev/null || true
    for _ in $(seq 1 20); do
        running "slurmd -N node" || running slurmctld || { echo "slurm stopped"; return 0; }
        sleep 0.5
    done
    pkill -9 -f "slurmd -N node" 2>/dev/null || true
    pkill -9 -x slurmctld 2>/dev/null || true
    echo "slurm stopped (killed)"
}

status() {
    if ! command -v sinfo >/dev/null; then
        echo "no Slurm client installed (sudo $0 install)"
        return 1
    fi
    sinfo -N -l
}

case "${1:-}" in
    install) install ;;
    start) start ;;
    stop) stop ;;
    status) status ;;
    *) echo "usage: $0 install|start|stop|status" >&2; exit 2 ;;
esac
