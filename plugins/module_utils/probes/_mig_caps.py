# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which MIG instance each /dev/nvidia-caps/nvidia-cap<N> node stands for, from the driver's capabilities files.

The driver writes /proc/driver/nvidia/capabilities/gpu<M>/mig/gi<X>/access and .../gi<X>/ci<Y>/access, each
with a "DeviceFileMinor: <N>" line: a process holding the nvidia-caps node of minor N holds that instance
(NVIDIA MIG user guide, "Device Nodes and Capabilities"). Linux only: Windows has no MIG.
"""

from __future__ import annotations

import os
import re

_GPU_DIR = re.compile(r"^gpu(\d{1,4})$")
_GI_DIR = re.compile(r"^gi(\d{1,3})$")
_CI_DIR = re.compile(r"^ci(\d{1,3})$")
_MINOR_LINE = re.compile(r"^DeviceFileMinor:\s*(\d{1,9})\s*$", re.MULTILINE)
_ACCESS_READ_LIMIT = 4096  # an access file is three short lines


def access_minor(path):
    """The DeviceFileMinor of one access file, or None when the file is missing or says none."""
    try:
        with open(path) as handle:
            text = handle.read(_ACCESS_READ_LIMIT)
    except (IOError, OSError):
        return None
    match = _MINOR_LINE.search(text)
    return int(match.group(1)) if match else None


def _numbered(directory, pattern):
    try:
        names = os.listdir(directory)
    except (IOError, OSError):
        return []
    found = [(int(match.group(1)), name) for match, name in ((pattern.match(n), n) for n in names) if match]
    return sorted(found)


def instance_minors(capabilities_dir):
    """{minor: {"gpu": M, "gi": X, "ci": Y or None}} for every GPU and compute instance the driver lists."""
    minors = {}
    for gpu, gpu_name in _numbered(capabilities_dir, _GPU_DIR):
        mig_dir = os.path.join(capabilities_dir, gpu_name, "mig")
        for gi, gi_name in _numbered(mig_dir, _GI_DIR):
            gi_dir = os.path.join(mig_dir, gi_name)
            minor = access_minor(os.path.join(gi_dir, "access"))
            if minor is not None:
                minors[minor] = {"gpu": gpu, "gi": gi, "ci": None}
            for ci, ci_name in _numbered(gi_dir, _CI_DIR):
                minor = access_minor(os.path.join(gi_dir, ci_name, "access"))
                if minor is not None:
                    minors[minor] = {"gpu": gpu, "gi": gi, "ci": ci}
    return minors


def cap_minor_from_name(name):
    """The minor a /dev/nvidia-caps node's name carries (nvidia-cap<N>), or None."""
    match = re.match(r"^nvidia-cap(\d{1,9})$", os.path.basename(name))
    return int(match.group(1)) if match else None


def instances_held(device_paths, minors):
    """The MIG instances a process holds: {(gpu, gi, ci or None)} of the nvidia-caps nodes among its devices.

    device_paths are the devices a scan found open (DeviceTable names a cap node nvidia-caps/nvidia-cap<N> by
    its device number); minors is instance_minors(). A cap node no instance owns (config, monitor) is no instance.
    """
    held = set()
    for path in device_paths:
        if os.path.basename(os.path.dirname(path)) != "nvidia-caps":
            continue
        owner = minors.get(cap_minor_from_name(path))
        if owner is not None:
            held.add((owner["gpu"], owner["gi"], owner["ci"]))
    return held
