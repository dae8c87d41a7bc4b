# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Append LINE to LOG until OUTPUT holds MARK (the running rulebook took the line: its sources follow the log), at
most SECONDS; exit 1 naming what it waited for. A source reads a log from its end once it has started, so a line
written before that is never an event: this is how a test knows the rulebook follows the log.

    until_following.py LOG LINE OUTPUT MARK SECONDS
"""
import sys
import time


def main(log, line, output, mark, seconds):
    deadline = time.monotonic() + float(seconds)
    while time.monotonic() < deadline:
        with open(log, "a") as handle:
            handle.write(line + "\n")
        poll_until = time.monotonic() + 1.0
        while time.monotonic() < min(poll_until, deadline):
            with open(output, "rb") as handle:
                if mark.encode() in handle.read():
                    print("following")
                    return 0
            time.sleep(0.1)  # the poll's interval
    print("the rulebook never took %r from %s within %s s (%r not in %s)" % (line, log, seconds, mark, output))
    return 1


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:6]))
