# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Start the real ansible-rulebook in the background, in a session of its own, its output to a file; print its pid.

    start_rulebook.py OUTPUT_FILE ANSIBLE_RULEBOOK ARG...

The caller waits for its ready line in OUTPUT_FILE, feeds events, ends it with the rulebook's shutdown rule, and kills
the session (os.killpg of the pid printed) only if it is still there at the end.
"""
import subprocess
import sys


def main(argv):
    with open(argv[1], "wb") as output:
        process = subprocess.Popen(argv[2:], stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT, start_new_session=True)
    print(process.pid)


if __name__ == "__main__":
    main(sys.argv)
