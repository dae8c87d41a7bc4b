# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where the node's GPU interfaces live: the one switch between a real node and a simulated one.

Everything that touches the driver (NVML, /dev/nvidia*, the kernel log, nvidia-smi, modprobe, lsmod,
systemctl) asks a NodeLayout for it. With the environment variable GPUOPS_SIM_ROOT set, the layout points
at the simulated node that gpu_sim built under that directory; otherwise at the real system. Nothing else
in the collection reads that variable. /proc, processes and signals are always the real ones.
"""

from __future__ import annotations

import os
import sys

SIM_ROOT_ENV = "GPUOPS_SIM_ROOT"

GPU_COMMANDS = ("nvidia-smi", "modprobe", "lsmod", "systemctl")


class NodeLayout:
    """Paths and entry points of one node's GPU stack."""

    def __init__(self, sim_root=None):
        self.sim_root = sim_root
        root = sim_root or "/"
        self.dev_dir = os.path.join(root, "dev")
        self.sys_dir = os.path.join(root, "sys")
        # What lsmod prints, read without starting it.
        self.modules_file = os.path.join(root, "proc", "modules")
        # Which MIG instance each /dev/nvidia-caps node stands for (Linux only: Windows has no MIG).
        self.mig_capabilities_dir = os.path.join(root, "proc", "driver", "nvidia", "capabilities")
        # A real node has no single kernel log file: the journal or dmesg is read instead.
        self.kernel_log_file = os.path.join(sim_root, "kernel.log") if sim_root else None
        # Where the remediation modules journal their actions and take the node's lock.
        self.journal_file = os.path.join(root, "var", "lib", "gpuops", "journal.jsonl")
        # Where a simulated node's syslog lines go (a real node's go to syslog itself): the remediations' closed-loop line.
        self.syslog_file = os.path.join(sim_root, "var", "log", "syslog") if sim_root else None
        self.lock_file = os.path.join(root, "run", "gpuops.lock")
        # The kernel's id of this boot (a new one at every boot): whether the node rebooted since a MIG layout was
        # recorded for a reboot. A simulated node's changes at its simulated reboot.
        self.boot_id_file = os.path.join(sim_root, "boot_id") if sim_root else "/proc/sys/kernel/random/boot_id"
        self._bin_dir = os.path.join(sim_root, "bin") if sim_root else None
        # Which /dev/dri nodes are an NVIDIA card's: a real node's sysfs names each card's PCI vendor (None: the scan
        # reads it there); a simulated node has no sysfs of its own, and only NVIDIA cards.
        self.dri_node_rule = _every_dri_node if sim_root else None

    @property
    def simulated(self):
        return self.sim_root is not None

    def command(self, module, name, required=False):
        """Absolute path of a GPU tool, or None when absent (fails the module when required)."""
        if self._bin_dir is None:
            return module.get_bin_path(name, required=required)
        path = os.path.join(self._bin_dir, name)
        if os.access(path, os.X_OK):
            return path
        if required:
            module.fail_json(msg="%s not found in the simulated node %s" % (name, self.sim_root))
        return None

    def load_nvml(self):
        """The pynvml module, bound to the simulated NVML library on a simulated node.

        Raises ImportError when nvidia-ml-py is not installed. On a simulated node pynvml's own wrapper
        code runs unchanged; only the library it calls into is the simulation's, loaded from the node's
        lib/ the way a real node's libnvidia-ml.so is: it is not part of the module that runs here.
        """
        import pynvml  # pylint: disable=import-error

        if self.simulated:
            pynvml.nvmlLib = _node_library(self.sim_root, "_sim_nvml").SimNvmlLibrary(self.sim_root)
            pynvml._nvmlGetFunctionPointer_cache = {}  # pylint: disable=protected-access
        return pynvml


def _every_dri_node(_node):
    return True


def _node_library(sim_root, name):
    """A module of the simulated node's lib/ (gpu_sim installs it there), imported once per process."""
    import importlib  # only a simulated node needs it

    lib_dir = os.path.join(sim_root, "lib")
    if lib_dir not in sys.path:
        sys.path.insert(0, lib_dir)
    return importlib.import_module(name)


def current_layout():
    return NodeLayout(os.environ.get(SIM_ROOT_ENV) or None)
