# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""End the ansible-rulebook that start_rulebook.py started, if it is still there: SIGTERM to its session, only when the
pid still is that ansible-rulebook leading its own process group (never a reused pid, never anyone else's group).

    stop_rulebook.py PID
"""
import os
import signal
import sys


def main(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as handle:
            argv = handle.read().split(b"\0")
        if not any(arg.endswith(b"ansible-rulebook") for arg in argv) or os.getpgid(pid) != pid:
            print("not ours: left alone")
            return
        os.killpg(pid, signal.SIGTERM)
        print("stopped")
    except (FileNotFoundError, ProcessLookupError):
        print("already ended")


if __name__ == "__main__":
    main(int(sys.argv[1]))
