# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which MIG instance each /dev/nvidia-caps/nvidia-cap<N> node stands for, from the driver's capabilities files.

The driver writes /proc/driver/nvidia/capabilities/gpu<M>/mig/gi<X>/access and .../gi<X>/ci<Y>/access, each
with a "DeviceFileMinor: <N>" line: a process holding the nvidia-caps node of minor N holds that instance
(NVIDIA MIG user guide, "Device Nodes and Capabilities"). Linux only: Windows has no MIG.
"""

from __future__ import annotations

import os

_ACCESS_READ_LIMIT = 4096  # an access file is three short lines
_MINOR_KEY = "DeviceFileMinor"


def _number_after(text, prefix, digits=9):
    """The number text carries after prefix ("gi12" -> 12), or None when the rest is not 1..digits ASCII digits."""
    rest = text[len(prefix):] if text.startswith(prefix) else ""
    return int(rest) if rest.isascii() and rest.isdigit() and len(rest) <= digits else None


def access_minor(path):
    """The DeviceFileMinor of one access file, or None when the file is missing or says none."""
    try:
        with open(path) as handle:
            text = handle.read(_ACCESS_READ_LIMIT)
    except (IOError, OSError):
        return None
    for line in text.splitlines():
        key, colon, value = line.partition(":")
        if colon and key.strip() == _MINOR_KEY:
            # "4 1" is no number: blanks count only around it
            return _number_after(value.strip(), "")
    return None


def _numbered(directory, prefix):
    """(number, name) of the entries of directory named prefix<number>, in number order."""
    try:
        names = os.listdir(directory)
    except (IOError, OSError):
        return []
    return sorted((number, name) for number, name in ((_number_after(n, prefix, 4), n) for n in names) if number is not None)


def instance_minors(capabilities_dir):
    """{minor: [{"gpu": M, "gi": X, "ci": Y or None}]} for every GPU and compute instance the driver lists.

    A minor two access files name is both instances' (never the last one read): the driver gives each its own, so a
    process holding such a node may be in either, and a narrowed run or the instance rung must count it in both."""
    minors = {}
    for gpu, gpu_name in _numbered(capabilities_dir, "gpu"):
        mig_dir = os.path.join(capabilities_dir, gpu_name, "mig")
        for gi, gi_name in _numbered(mig_dir, "gi"):
            gi_dir = os.path.join(mig_dir, gi_name)
            minor = access_minor(os.path.join(gi_dir, "access"))
            if minor is not None:
                minors.setdefault(minor, []).append({"gpu": gpu, "gi": gi, "ci": None})
            for ci, ci_name in _numbered(gi_dir, "ci"):
                minor = access_minor(os.path.join(gi_dir, ci_name, "access"))
                if minor is not None:
                    minors.setdefault(minor, []).append({"gpu": gpu, "gi": gi, "ci": ci})
    return minors


def cap_minor_from_name(name):
    """The minor a /dev/nvidia-caps node's name carries (nvidia-cap<N>), or None."""
    return _number_after(os.path.basename(name), "nvidia-cap")


def instances_held(device_paths, minors):
    """The MIG instances a process holds: {(gpu, gi, ci or None)} of the nvidia-caps nodes among its devices.

    device_paths are the devices a scan found open (DeviceTable names a cap node nvidia-caps/nvidia-cap<N> by
    its device number); minors is instance_minors(). A cap node no instance owns (config, monitor) is no instance.
    """
    held = set()
    for path in device_paths:
        if os.path.basename(os.path.dirname(path)) != "nvidia-caps":
            continue
        for owner in minors.get(cap_minor_from_name(path)) or []:
            held.add((owner["gpu"], owner["gi"], owner["ci"]))
    return held
