# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Test scaffolding: a process tree across GPUs, detached from the task that starts it.

    family.py PARENT_DEVICE CHILD_DEVICE REPORT

The parent holds PARENT_DEVICE open, its child CHILD_DEVICE; both wait until killed. The process that started them,
the leader of their process group and session, has exited: they are what a crash leaves, ended by default. REPORT gets
{"parent": pid, "child": pid, "started": ["pid:start time", ...]} once both hold their device; the command returns then.
"""
import json
import os
import sys
import time

parent_device, child_device, report = sys.argv[1:4]
read_end, write_end = os.pipe()
if os.fork():
    os.close(write_end)
    os.read(read_end, 1)  # the tree holds its devices: the task may go on
    sys.exit(0)
os.setsid()
if os.fork():
    os._exit(0)  # the process that started the tree exits: the tree is what a crash leaves (its group leader is gone)
os.close(read_end)
held = os.open(parent_device, os.O_RDWR)
ready_read, ready_write = os.pipe()
child = os.fork()
if child == 0:
    os.close(ready_read)
    os.close(held)  # the parent's device is the parent's: the child holds only its own
    held = os.open(child_device, os.O_RDWR)
    os.write(ready_write, b"x")
    while True:
        time.sleep(3600)
os.close(ready_write)
os.read(ready_read, 1)


def start_time(pid):
    with open("/proc/%d/stat" % pid) as stat:
        return int(stat.read().rsplit(")", 1)[1].split()[19])


with open(report + ".tmp", "w") as handle:
    json.dump({"parent": os.getpid(), "child": child, "started": ["%d:%d" % (pid, start_time(pid)) for pid in (os.getpid(), child)]},
              handle)
os.rename(report + ".tmp", report)
os.write(write_end, b"x")
while True:
    time.sleep(3600)
