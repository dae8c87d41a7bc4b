# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Append one line to each file, as the kernel's log writer does (one write of the whole line).

    append_lines.py LINE FILE...
"""
import sys


def main(line, paths):
    for path in paths:
        with open(path, "a") as handle:
            handle.write(line + "\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
