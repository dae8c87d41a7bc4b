# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Print the pids /proc/locks lists as holding a flock on PATH (by its device and inode), one per line.

    flock_held.py PATH
"""

import os
import sys


def main(path):
    info = os.stat(path)
    wanted = "%02x:%02x:%d" % (os.major(info.st_dev), os.minor(info.st_dev), info.st_ino)
    with open("/proc/locks") as handle:
        for line in handle:
            fields = line.split()
            if len(fields) > 5 and fields[1] == "FLOCK" and fields[5] == wanted:
                print(fields[4])


if __name__ == "__main__":
    main(sys.argv[1])
