# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The attributes every module of the collection documents: whether it runs in check mode and in diff mode."""

from __future__ import annotations


class ModuleDocFragment:

    # Standard documentation fragment
    DOCUMENTATION = r"""
options: {}
attributes:
  check_mode:
    description: Can run in C(check_mode) and return changed status prediction without modifying target.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in C(check_mode)), when in diff mode.
"""

    # Attributes of a module that only reads.
    INFO_MODULE = r"""
options: {}
attributes:
  check_mode:
    support: full
    details:
      - This action does not modify state.
  diff_mode:
    support: N/A
    details:
      - This action does not modify state.
"""

    # Attributes of a module that acts on the node.
    ACTION_MODULE = r"""
options: {}
attributes:
  check_mode:
    support: full
    details:
      - Predicts the same C(changed) and C(diff) as the real run, refuses in the same cases, and changes nothing.
  diff_mode:
    support: full
"""

    # A module whose work is an action plugin on the controller (its module file holds only the documentation).
    CONTROLLER_ACTION = r"""
options: {}
attributes:
  action:
    description: Indicates this has a corresponding action plugin so some parts of the options can be executed on the controller.
    support: full
  async:
    description: Supports being used with the C(async) keyword.
    support: none
  bypass_host_loop:
    description: Forces a 'global' task that does not execute per host, this bypasses per host templating and serial, throttle and other loop considerations.
    support: none
"""

    # A module that runs only on the controller, for any target platform, and has no diff to show.
    CONTROLLER_ONLY = r"""
options: {}
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  platform:
    description: Target OS/families that can be operated against.
    support: full
    platforms: all
"""

    # Linux GPU node: the target needs nothing but the driver and Python; nvidia-ml-py is used when present.
    LINUX_GPU = r"""
options: {}
attributes:
  platform:
    support: full
    platforms: posix
    description: Target OS/families that can be operated against.
notes:
  - With the environment variable C(GPUOPS_SIM_ROOT) set on the target, the module works on the simulated
    GPU node that M(gpuops.remediation.gpu_sim) built under that directory instead of the real driver.
"""

    # Windows GPU node: an action plugin on the controller, the stock tools on the target through ansible.windows.
    WINDOWS = r"""
options: {}
attributes:
  platform:
    support: full
    platforms: windows
    description: Target OS/families that can be operated against.
requirements:
  - the C(ansible.windows) collection on the controller
notes:
  - With the host variable C(gpuops_windows_sim_root) set, the module works on the simulated Windows node that
    M(gpuops.remediation.win_gpu_sim) built under that directory on the controller instead of a Windows host.
"""
