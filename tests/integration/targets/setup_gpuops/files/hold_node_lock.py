# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Hold the node lock as an acting module does (NodeLock), while MARKER exists; write this process's pid to PIDFILE
once the lock is held. The test removes MARKER to let the run go on (600 s at most, so that a failed test leaves
nothing behind; every step of the test releases it long before).

    hold_node_lock.py LOCK MARKER PIDFILE
"""

import os
import sys
import time

from ansible_collections.gpuops.remediation.plugins.module_utils._lock import NodeLock


def main(lock_path, marker, pidfile):
    with NodeLock(lock_path, timeout=30):
        with open(pidfile, "w", encoding="utf-8") as handle:
            handle.write("%d\n" % os.getpid())
        deadline = time.monotonic() + 600
        while os.path.exists(marker) and time.monotonic() < deadline:
            time.sleep(0.05)


if __name__ == "__main__":
    main(*sys.argv[1:4])
