"""Hold a device file open while running a command as our child, then report whether we survived it.

Used to prove that a playbook never kills its own ancestors: this process is one of them and holds the GPU.
"""
import json
import os
import subprocess
import sys

device, report, command = sys.argv[1], sys.argv[2], sys.argv[3:]
holder = open(device, "rb")  # pylint: disable=consider-using-with
rc = subprocess.call(command, timeout=1200)  # the playbook run inside; past this, fail rather than hang
with open(report) as handle:
    inner = json.load(handle)
with open(report, "w") as handle:
    json.dump({"ancestor_pid": os.getpid(), "ancestor_alive": True, "inner_rc": rc, "result": inner}, handle)
sys.exit(rc)
