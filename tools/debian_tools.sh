#!/usr/bin/env bash
# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Debian tools some tests drive for real (promtool, headless chromium), installed on demand.
#
#   tools/debian_tools.sh ensure CMD:PACKAGE ...   for each CMD not on PATH, install PACKAGE with apt-get (root only),
#                                                  one apt-get at a time on this machine (flock); exit 3 with the
#                                                  reason when a CMD is missing and cannot be installed.
#                                                  PACKAGE may list alternatives, PKG1|PKG2|...: the first one apt
#                                                  can install here is installed (java:openjdk-17-jre-headless|openjdk-21-...
#                                                  takes 17 on Debian 12, which has no 21, and 21 on Debian 13).
#   tools/debian_tools.sh check CMD:PACKAGE ...    exit 0 when every CMD is on PATH or could be installed; else 3.
#   tools/debian_tools.sh install PACKAGE ...      apt-get install them (root), under the same lock: what
#                                                  tools/slurm_env.sh and tools/docker_env.sh install with, so that
#                                                  targets running side by side never run two apt-gets at once.
set -euo pipefail

LOCK=${TMPDIR:-/tmp}/gpuops-apt.lock

missing_packages() {
    local spec
    for spec in "$@"; do
        command -v "${spec%%:*}" >/dev/null 2>&1 || echo "${spec#*:}"
    done
}

# The first of the alternatives PKG1|PKG2|... that apt could install here (the exit code of apt-get's simulated install:
# apt-cache show succeeds for a name Debian 13 only mentions, such as openjdk-17-jre-headless), or nothing.
known_alternative() {
    local alternative
    local -a alternatives
    IFS='|' read -r -a alternatives <<<"$1"
    for alternative in "${alternatives[@]}"; do
        if apt-get install --simulate -q --no-install-recommends "$alternative" >/dev/null 2>&1; then
            echo "$alternative"
            return 0
        fi
    done
    return 1
}

# The packages to install for the specs PKG or PKG1|PKG2|..., each alternative resolved by apt's word; the package lists
# are fetched once when one is unknown (a fresh machine has none). Exit 3 naming the ones apt does not have.
resolve_packages() {
    local package resolved updated=0
    local -a packages=()
    for package in "$@"; do
        if [[ $package != *'|'* ]]; then
            packages+=("$package")
            continue
        fi
        if ! resolved=$(known_alternative "$package") && ((updated == 0)); then
            (flock 9; apt-get update -q >/dev/null) 9>"$LOCK"
            updated=1
            resolved=$(known_alternative "$package") || true
        fi
        [[ -n $resolved ]] || { echo "debian_tools: apt has none of ${package//|/, }" >&2; exit 3; }
        packages+=("$resolved")
    done
    echo "${packages[@]}"
}

can_install() { [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; }

# apt-get install of the packages, one apt-get at a time on this machine; the package lists are fetched only when the
# first try fails (a fresh machine has none).
apt_install() {
    (
        flock 9
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@" >/dev/null 2>&1 || {
            apt-get update -q >/dev/null
            DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@" >/dev/null
        }
    ) 9>"$LOCK"
}

main() {
    local action=${1:-} missing resolved
    shift || true
    if [[ $action == install ]]; then
        can_install || { echo "debian_tools: installing $* needs root and apt-get" >&2; exit 3; }
        apt_install "$@"
        exit 0
    fi
    [[ $action == ensure || $action == check ]] || { echo "usage: $0 ensure|check CMD:PACKAGE ... | install PACKAGE ..." >&2; exit 2; }
    mapfile -t missing < <(missing_packages "$@")
    ((${#missing[@]})) || exit 0
    if ! can_install; then
        echo "debian_tools: needs Debian's ${missing[*]//|/ or }, or root with apt-get to install them" >&2
        exit 3
    fi
    [[ $action == check ]] && exit 0
    resolved=$(resolve_packages "${missing[@]}") || exit 3
    read -r -a missing <<<"$resolved"
    echo "debian_tools: installing ${missing[*]} with apt-get"
    apt_install "${missing[@]}"
    mapfile -t missing < <(missing_packages "$@")
    ((${#missing[@]} == 0)) || { echo "debian_tools: still missing after install: ${missing[*]}" >&2; exit 3; }
}

main "$@"
