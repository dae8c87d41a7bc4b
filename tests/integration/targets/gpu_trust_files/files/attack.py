# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a hostile local user runs (as that user, through runuser) while root's module runs.

    attack.py swap DIR NAME TARGET STOP   swap DIR/NAME between a file of the user's own and a link to TARGET, as fast
                                          as it can, until STOP exists (600 s at most); DIR/.NAME.racing says it runs
    attack.py flock PATH STOP             hold an exclusive flock on PATH (a directory the user can open) until STOP
                                          exists (600 s at most)
"""

import fcntl
import os
import sys
import time

LIMIT = 600


def swap(directory, name, target, stop):
    path = os.path.join(directory, name)
    racing = os.path.join(directory, "." + name + ".racing")
    deadline = time.monotonic() + LIMIT
    while time.monotonic() < deadline and not os.path.exists(stop):
        if not os.path.exists(racing):
            # Waited on instead of NAME itself, which this loop keeps removing.
            os.close(os.open(racing, os.O_WRONLY | os.O_CREAT, 0o644))
        for make in (lambda: os.symlink(target, path), lambda: os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))):
            try:
                os.unlink(path)
            except OSError:
                pass
            try:
                make()
            except OSError:
                pass


def hold(path, stop):
    fd = os.open(path, os.O_RDONLY)
    deadline = time.monotonic() + LIMIT
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if time.monotonic() > deadline:
                sys.exit("attack: %s stayed locked by another for %d s" % (path, LIMIT))
            time.sleep(0.05)
    while time.monotonic() < deadline and not os.path.exists(stop):
        time.sleep(0.05)


if __name__ == "__main__":
    if sys.argv[1] == "swap":
        swap(*sys.argv[2:6])
    else:
        hold(*sys.argv[2:4])
