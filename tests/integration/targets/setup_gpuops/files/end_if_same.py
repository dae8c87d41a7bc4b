# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Test scaffolding: SIGKILL each PID:START_TIME given whose pid still names that process (a reused pid is left).

    end_if_same.py PID:START_TIME [PID:START_TIME...]    prints {"ended": [pids]}
"""
import json
import os
import signal
import sys


def start_time(pid):
    try:
        with open("/proc/%s/stat" % pid) as handle:
            return int(handle.read().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


ended = []
for pair in sys.argv[1:]:
    pid, start = pair.split(":")
    if start_time(pid) == int(start):
        os.kill(int(pid), signal.SIGKILL)
        ended.append(int(pid))
print(json.dumps({"ended": ended}))
