#!/usr/bin/env bash
# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
#
# A real one-node Slurm cluster on localhost for the drain tests: munged, slurmctld and slurmd, run as root, with
# no systemd and nothing in /etc/slurm: everything under one short directory of the test's own.
#
#   tools/slurm_env.sh start DIR NODE [OTHER...]
#                                       install Debian's slurmctld, slurmd, slurm-client and munge when missing
#                                       (root + apt-get), write DIR/slurm.conf for node NODE (NodeHostname=localhost),
#                                       start the three daemons, wait until NODE is idle. Prints SLURM_CONF=... last.
#                                       OTHER nodes (the rest of a fleet, for the circuit breaker's count) are declared
#                                       in a partition of their own, `fleet`, with no slurmd: slurmctld knows them (they
#                                       can be drained, their reasons read) and never schedules on them.
#   tools/slurm_env.sh stop DIR         stop the daemons that `start DIR` started (by their pid files), and only those.
#   tools/slurm_env.sh check            exit 0 when this machine can run it; else print why and exit 3.
#
# DIR must be short: Slurm and munge keep sockets under it, and a socket path is limited to 107 bytes.
set -euo pipefail

PACKAGES=(slurmctld slurmd slurm-client munge)
READY_TIMEOUT=30

say() { echo "slurm_env: $*"; }
die() { echo "slurm_env: $*" >&2; exit 1; }

have_slurm() { command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v scontrol >/dev/null && command -v munged >/dev/null; }

check() {
    have_slurm && return 0
    if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then return 0; fi
    echo "needs Debian's slurmctld, slurmd, slurm-client and munge, or root with apt-get to install them"
    return 3
}

install_packages() {
    have_slurm && return 0
    say "installing ${PACKAGES[*]} with apt-get"
    bash "$(dirname "$0")/debian_tools.sh" install "${PACKAGES[@]}"
}

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# ReturnToService=1, as most sites run it: a node that was DOWN only for not responding comes back when slurmd
# registers; a node an administrator set DOWN stays DOWN (2 would return it at its next registration, undoing the
# decision the tests check is left alone).
write_conf() {
    local dir=$1 node=$2 other
    shift 2
    cat > "$dir/slurm.conf" <<CONF
ClusterName=gpuops
SlurmctldHost=localhost
AuthType=auth/munge
AuthInfo=socket=$dir/munge/sock
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
MpiDefault=none
ReturnToService=1
NodeName=$node NodeHostname=localhost CPUs=$(nproc) State=UNKNOWN
PartitionName=debug Nodes=$node Default=YES MaxTime=INFINITE State=UP
CONF
    (( $# )) || return 0
    for other in "$@"; do
        echo "NodeName=$other NodeHostname=localhost CPUs=1 State=UNKNOWN" >> "$dir/slurm.conf"
    done
    local IFS=,
    echo "PartitionName=fleet Nodes=$* Default=NO MaxTime=INFINITE State=UP" >> "$dir/slurm.conf"
}

start() {
    local dir=$1 node=$2 i
    shift 2
    (( ${#dir} <= 60 )) || die "DIR is ${#dir} bytes long; keep it under 60 (socket paths are limited to 107 bytes)"
    install_packages
    mkdir -p "$dir"/{state,spool,log,run,munge}
    # munged refuses a socket directory others cannot enter and a key others can read.
    chmod 0755 "$dir" "$dir/munge"
    head -c 1024 /dev/urandom > "$dir/munge/munge.key"
    chmod 0600 "$dir/munge/munge.key"
    munged --key-file="$dir/munge/munge.key" --socket="$dir/munge/sock" --pid-file="$dir/run/munged.pid" \
        --log-file="$dir/log/munged.log" --seed-file="$dir/munge/seed" --force
    write_conf "$dir" "$node" "$@"
    export SLURM_CONF=$dir/slurm.conf
    slurmctld
    slurmd -N "$node"
    for ((i = 0; i < READY_TIMEOUT * 5; i++)); do
        if sinfo --noheader --Node --nodes "$node" --format '%T' 2>/dev/null | grep -q '^idle'; then
            say "node $node idle"
            echo "SLURM_CONF=$SLURM_CONF"
            return 0
        fi
        sleep 0.2
    done
    tail -n 20 "$dir"/log/*.log >&2 || true
    die "node $node did not become idle in ${READY_TIMEOUT} s"
}

# Stop one daemon by its pid file, only while that pid is still the program we started.
stop_one() {
    local pid_file=$1 program=$2 pid i
    [[ -r $pid_file ]] || return 0
    read -r pid < "$pid_file" || return 0
    [[ $pid =~ ^[0-9]+$ ]] || return 0
    [[ $(cat "/proc/$pid/comm" 2>/dev/null) == "$program" ]] || return 0
    kill -TERM "$pid" 2>/dev/null || return 0
    for ((i = 0; i < 50; i++)); do
        kill -0 "$pid" 2>/dev/null || return 0
        sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
}

stop() {
    local dir=$1
    # Jobs first: slurmstepd ignores SIGTERM, and a job left running would outlive the cluster.
    [[ -r $dir/slurm.conf ]] && SLURM_CONF=$dir/slurm.conf scancel --quiet --user="$(id -un)" 2>/dev/null || true
    stop_one "$dir/run/slurmd.pid" slurmd
    stop_one "$dir/run/slurmctld.pid" slurmctld
    stop_one "$dir/run/munged.pid" munged
    say "stopped the daemons of $dir"
}

case ${1:-} in
    start) [[ $# -ge 3 ]] || die "usage: $0 start DIR NODE [OTHER...]"; shift; start "$@" ;;
    stop) [[ $# -eq 2 ]] || die "usage: $0 stop DIR"; stop "$2" ;;
    check) check ;;
    *) die "usage: $0 start DIR NODE [OTHER...] | stop DIR | check" ;;
esac
