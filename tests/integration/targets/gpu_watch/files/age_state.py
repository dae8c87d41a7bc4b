# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Make a gpu_watch state file SECONDS older, as if its run had been that long ago (the next scheduled run):
its write time, last success and the start of every high-usage streak move back; nothing else changes.

    age_state.py STATE SECONDS
"""

import json
import sys


def main(path, seconds):
    with open(path, encoding="utf-8") as handle:
        state = json.load(handle)
    for key in ("updated_epoch", "last_success_epoch"):
        if state.get(key) is not None:
            state[key] -= seconds
    for track in state["gpus"].values():
        if track.get("high_usage_since") is not None:
            track["high_usage_since"] -= seconds
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(state, handle)


if __name__ == "__main__":
    main(sys.argv[1], float(sys.argv[2]))
