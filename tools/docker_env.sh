#!/usr/bin/env bash
# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
#
# A Docker engine and a small local image for the container integration tests, with no registry.
#
#   tools/docker_env.sh start   use the engine `docker info` reaches; else (root + apt-get) install docker.io
#                               and debootstrap when missing and start dockerd in the background; then import
#                               the image local/gpuops-bookworm (Debian minbase + python3) unless it is there.
#                               The last line says "dockerd: started (pid N)" or "dockerd: already running".
#   tools/docker_env.sh stop    stop the dockerd that `start` started (its pid file), and only that one.
#   tools/docker_env.sh status  say whether an engine answers, and whether it is ours.
#   Exit status 0 when the engine and the image are there; else 1, the reason on stderr's last line (no root, no
#   apt-get, a dockerd that exits: it cannot create its iptables chains in an unprivileged container), and a dockerd
#   this script started is stopped again. tests/integration/run.py reports such a target "not run: <reason>".
#
# Environment: GPUOPS_DOCKER_STATE (pid file and log, default ${TMPDIR:-/tmp}/gpuops-docker),
# GPUOPS_DOCKER_IMAGE (default local/gpuops-bookworm), GPUOPS_DEBIAN_MIRROR (default http://deb.debian.org/debian).
set -euo pipefail

STATE_DIR=${GPUOPS_DOCKER_STATE:-${TMPDIR:-/tmp}/gpuops-docker}
IMAGE=${GPUOPS_DOCKER_IMAGE:-local/gpuops-bookworm}
MIRROR=${GPUOPS_DEBIAN_MIRROR:-http://deb.debian.org/debian}
PID_FILE=$STATE_DIR/dockerd.pid
LOG_FILE=$STATE_DIR/dockerd.log
READY_TIMEOUT=60

say() { echo "docker_env: $*"; }
die() { echo "docker_env: $*" >&2; exit 1; }

engine_answers() { docker info >/dev/null 2>&1; }

# Field 22 of /proc/<pid>/stat (after the parenthesised comm, which may hold spaces): identifies a pid for good.
start_time_of() {
    local stat
    stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
    stat=${stat##*) }
    # shellcheck disable=SC2086  # split the fields on purpose
    set -- $stat
    echo "${20}"
}

# The pid in our pid file when that process still runs and is the dockerd we started (same start time).
our_dockerd() {
    local pid recorded now
    [[ -r $PID_FILE ]] || return 1
    read -r pid recorded < "$PID_FILE" || return 1
    [[ $pid =~ ^[0-9]+$ ]] || return 1
    now=$(start_time_of "$pid") || return 1
    [[ $now == "$recorded" && $(cat "/proc/$pid/comm" 2>/dev/null) == dockerd ]] || return 1
    echo "$pid"
}

install_packages() {
    local missing=()
    command -v dockerd >/dev/null 2>&1 || missing+=(docker.io)
    command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
    if ((${#missing[@]})); then
        say "installing ${missing[*]} with apt-get"
        bash "$(dirname "$0")/debian_tools.sh" install "${missing[@]}"
    fi
    # Debian 13 ships the CLI apart from the engine (docker-cli); Debian 12's docker.io holds both.
    bash "$(dirname "$0")/debian_tools.sh" ensure "docker:docker-cli|docker.io" >/dev/null \
        || die "the Docker engine is installed but no docker CLI is on PATH, and apt-get could not install one"
    # docker.io's postinst may have started the engine through systemd: use it rather than start another.
}

# dockerd's own last words, on one line: its "failed to start daemon: ..." (exit status 4 in an unprivileged container,
# where it cannot create its iptables chains), else the log's last line.
why_dockerd_exited() {
    local line
    line=$(grep -a '^failed to start daemon' "$LOG_FILE" | tail -1)
    [[ -n $line ]] || line=$(grep -a . "$LOG_FILE" | tail -1)
    printf '%s (log: %s)' "${line//$'\r'/}" "$LOG_FILE"
}

start_dockerd() {
    mkdir -p "$STATE_DIR"
    if pgrep -x dockerd >/dev/null 2>&1; then
        die "a dockerd runs but 'docker info' cannot reach it (another socket or user?); not starting a second one"
    fi
    say "starting dockerd (log: $LOG_FILE)"
    # setsid: the daemon outlives this script and the Ansible task that ran it.
    setsid dockerd >"$LOG_FILE" 2>&1 < /dev/null &
    local pid=$!
    local ticks
    ticks=$(start_time_of "$pid") || die "dockerd exited at once; see $LOG_FILE"
    echo "$pid $ticks" > "$PID_FILE"
    local waited=0
    until engine_answers; do
        kill -0 "$pid" 2>/dev/null || die "dockerd exited: $(why_dockerd_exited)"
        ((waited < READY_TIMEOUT * 2)) || die "dockerd not ready after ${READY_TIMEOUT}s; see $LOG_FILE"
        sleep 0.5
        waited=$((waited + 1))
    done
    say "dockerd ready after about $((waited / 2)) s"
    STARTED_PID=$pid
}

build_image() {
    if docker image inspect "$IMAGE" >/dev/null 2>&1; then
        say "image $IMAGE present"
        return
    fi
    command -v debootstrap >/dev/null 2>&1 || die "image $IMAGE is missing and debootstrap is not installed"
    local rootfs
    rootfs=$(mktemp -d "${TMPDIR:-/tmp}/gpuops-rootfs.XXXXXX")
    # shellcheck disable=SC2064  # expand now: the trap must remove this directory
    trap "rm -rf '$rootfs'" EXIT
    say "building $IMAGE with debootstrap from $MIRROR"
    debootstrap --variant=minbase --include=python3 bookworm "$rootfs" "$MIRROR" > "$STATE_DIR/debootstrap.log" 2>&1 \
        || die "debootstrap failed; see $STATE_DIR/debootstrap.log"
    tar -C "$rootfs" -c . | docker import - "$IMAGE" >/dev/null
    rm -rf "$rootfs"
    trap - EXIT
    say "image $IMAGE imported"
}

cmd_start() {
    mkdir -p "$STATE_DIR"
    STARTED_PID=
    if engine_answers; then
        say "using the engine 'docker info' reaches"
    else
        [[ $(id -u) == 0 ]] || die "no Docker engine answers and this is not root: cannot install or start one"
        command -v dockerd >/dev/null 2>&1 && command -v debootstrap >/dev/null 2>&1 \
            || command -v apt-get >/dev/null 2>&1 || die "no Docker engine answers and there is no apt-get to install one"
        install_packages
        engine_answers || start_dockerd
    fi
    # In a process of its own (errexit holds there): if the image cannot be had, a dockerd started here is stopped,
    # and the last line on stderr stays the reason.
    if ! bash "${BASH_SOURCE[0]}" image; then
        [[ -z $STARTED_PID ]] || cmd_stop
        exit 1
    fi
    if [[ -n $STARTED_PID ]]; then
        echo "dockerd: started (pid $STARTED_PID)"
    else
        echo "dockerd: already running"
    fi
}

cmd_stop() {
    local pid
    if ! pid=$(our_dockerd); then
        say "no dockerd started by this script runs; nothing to stop"
        rm -f "$PID_FILE"
        return
    fi
    say "stopping dockerd pid $pid"
    kill -TERM "$pid"
    for _ in $(seq 1 60); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.5
    done
    if kill -0 "$pid" 2>/dev/null; then
        die "dockerd pid $pid still runs 30 s after SIGTERM; see $LOG_FILE"
    fi
    rm -f "$PID_FILE"
    say "dockerd stopped"
}

cmd_status() {
    local pid
    if pid=$(our_dockerd); then
        say "dockerd pid $pid, started by this script"
    elif engine_answers; then
        say "an engine answers, not started by this script"
    else
        say "no engine answers"
        return 1
    fi
}

case ${1:-start} in
    start) cmd_start ;;
    stop) cmd_stop ;;
    status) cmd_status ;;
    image) build_image ;;
    *) die "usage: $0 [start|stop|status]" ;;
esac
