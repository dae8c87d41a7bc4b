# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Make a simulated node's NVML hang (a driver stuck in D state) or answer again, under the node's lock.

    set_hang.py ROOT true|false
"""

import sys

from ansible_collections.gpuops.remediation.plugins.module_utils.simulation._sim_state import update_state


def main(root, hang):
    update_state(root, lambda state: state.update(nvml_hang=hang))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2] == "true")
