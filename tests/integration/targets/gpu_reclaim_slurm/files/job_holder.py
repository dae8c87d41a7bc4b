#!/bin/sh
# sbatch runs its script by the shebang; ansible-test allows /bin/sh here: sh runs the next line, Python reads a string.
''''exec python3 "$0" "$@" #'''
# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Test scaffolding, run as a Slurm batch script: the job's own process opens a (simulated) GPU device file and holds
it until the test creates the release file.

    sbatch ... job_holder.py DEVICE REPORT RELEASE

REPORT then holds {"pid", "start_time" (clock ticks)} of this process, written once the device is open.
"""
import json
import os
import sys
import time

device, report, release = sys.argv[1:4]
held = os.open(device, os.O_RDWR)
with open("/proc/self/stat") as stat:
    started = int(stat.read().rsplit(")", 1)[1].split()[19])
with open(report + ".tmp", "w") as handle:
    json.dump({"pid": os.getpid(), "start_time": started}, handle)
os.rename(report + ".tmp", report)
while not os.path.exists(release):
    time.sleep(0.2)
