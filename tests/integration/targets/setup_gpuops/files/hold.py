# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Test scaffolding: a process that holds device files open, detached from the task that starts it.

    hold.py REPORT DEVICE [DEVICE...]

The command returns once the holder has every device open; REPORT then holds {"pid", "start_time"
(clock ticks), "started": "pid:start time"}, what end_if_same.py takes. It waits until killed. The process that
started it, the leader of its process group and session, has exited: it is what a crash leaves, ended by default.
"""
import json
import os
import sys
import time

report, devices = sys.argv[1], sys.argv[2:]
read_end, write_end = os.pipe()
if os.fork():
    os.close(write_end)
    sys.exit(0 if os.read(read_end, 1) == b"x" else 1)
os.setsid()
if os.fork():
    os._exit(0)  # the process that started it exits: the holder is what a crash leaves (its group leader is gone)
os.close(read_end)
held = [os.open(path, os.O_RDWR) for path in devices]
with open("/proc/self/stat") as stat:
    started = int(stat.read().rsplit(")", 1)[1].split()[19])
with open(report + ".tmp", "w") as handle:
    json.dump({"pid": os.getpid(), "start_time": started, "started": "%d:%d" % (os.getpid(), started)}, handle)
os.rename(report + ".tmp", report)
os.write(write_end, b"x")
os.close(write_end)
while True:
    time.sleep(3600)
