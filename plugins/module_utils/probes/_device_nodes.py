# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The GPU device nodes of a node and their identity: a device is known by its type and device number (a
descriptor) or the (device, inode) pair of one of its nodes (a mapping), never by the text of a path
(device_identity, DeviceTable); the NVIDIA DRM nodes are told by their PCI vendor in sysfs (SysfsDriNodes)."""

from __future__ import annotations

import os
import re
import stat as stat_module

try:
    from ansible_collections.gpuops.remediation.plugins.module_utils.probes._proc_files import _listdir, _read_all
except ImportError:  # copied flat into a simulated node's lib/, or run on its own
    from _proc_files import _listdir, _read_all  # type: ignore[no-redef] # pylint: disable=import-error

NVIDIA_PCI_VENDOR = "0x10de"
# A simulated node's registry of its device files (hard links made when it was built), under its sysfs: the
# simulation's counterpart of the kernel knowing a device whose node was deleted.
SIM_REGISTRY = os.path.join("dev", "gpuops-nodes")


class SysfsDriNodes:
    """Whether a /dev/dri node (card0, renderD128) belongs to an NVIDIA card, by the PCI vendor sysfs names."""

    def __init__(self, sys_dir="/sys"):
        self.sys_dir = sys_dir
        self._cache = {}

    def __call__(self, node):
        if node not in self._cache:
            vendor_file = os.path.join(self.sys_dir, "class", "drm", node, "device", "vendor")
            try:
                with open(vendor_file) as handle:
                    vendor = handle.read().strip().lower()
            except (OSError, UnicodeDecodeError):
                vendor = None
            self._cache[node] = vendor == NVIDIA_PCI_VENDOR
        return self._cache[node]


def device_identity(mode, ino, dev, rdev):
    """What makes two opened files the same device, from their stat fields: the one place that decides it.

    A character device is its device number: every node with that major:minor (another path, a bind mount,
    another mount namespace, a chroot, a second node made with mknod, a deleted node) opens the same device.
    A regular file (a simulated node's devices are regular files) is its (filesystem, inode) pair, which its
    hard links and bind mounts share. Anything else (a socket, a pipe, a directory) is no device: None.
    """
    kind = stat_module.S_IFMT(mode)
    if kind == stat_module.S_IFCHR:
        return ("rdev", rdev)
    if kind == stat_module.S_IFREG:
        return ("inode", dev, ino)
    return None


def _stat_fields(st):
    """(mode, ino, dev, rdev) of an os.stat result."""
    return st.st_mode, st.st_ino, st.st_dev, st.st_rdev


def _map_fields(st_dev, st_ino):
    """(b" MAJ:MIN ", b"INODE") as a /proc/<pid>/maps line shows a file: "%02x:%02x %lu"."""
    return b" %02x:%02x " % (os.major(st_dev), os.minor(st_dev)), b"%d" % st_ino


def _frontend_name(minor):
    return {255: "nvidiactl", 254: "nvidia-modeset"}.get(minor, "nvidia%d" % minor)


# The driver's character majors, by their name in /proc/devices: the node name of each minor.
_DRIVER_MAJORS = {
    "nvidia-frontend": _frontend_name,
    "nvidia": _frontend_name,
    "nvidia-uvm": lambda minor: "nvidia-uvm-tools" if minor == 1 else "nvidia-uvm",
    "nvidia-nvswitch": lambda minor: "nvidia-nvswitchctl" if minor == 255 else "nvidia-nvswitch%d" % minor,
    "nvidia-caps": lambda minor: "nvidia-caps/nvidia-cap%d" % minor,
    "nvidia-caps-imex-channels": lambda minor: "nvidia-caps-imex-channels/channel%d" % minor,
}


_CANONICAL = re.compile(r"^nvidia(?:\d+|ctl|-uvm|-uvm-tools|-modeset|-nvswitch\d+|-nvswitchctl)$")


def _driver_majors(proc_root):
    """{major: name of a minor's node} of the driver's character devices /proc/devices lists; drm's too."""
    majors = {}
    try:
        with open(proc_root + "/devices") as handle:
            text = handle.read()
    except (OSError, UnicodeDecodeError):
        return majors
    for line in text.split("Block devices:")[0].splitlines():
        fields = line.split()
        if len(fields) == 2 and fields[0].isdigit():
            if fields[1] in _DRIVER_MAJORS:
                majors[int(fields[0])] = _DRIVER_MAJORS[fields[1]]
            elif fields[1] == "drm":
                majors[int(fields[0])] = "drm"
    return majors


class DeviceTable:
    """The GPU devices of a node, by identity: the answer to "which device is this opened file?".

    The nodes under dev_dir: nvidia* (nvidia0..N, nvidiactl, nvidia-uvm, nvidia-modeset, nvidia-caps/*, ...)
    and the dri nodes of NVIDIA cards (nvidia_dri: a function of a dri node's name, true for an NVIDIA card's;
    None: what sysfs under sys_dir says, as on a real node; NodeLayout.dri_node_rule gives the rule of the node
    in hand). On a node of character devices, also any device of the driver's majors (/proc/devices): a node
    made elsewhere for a device dev_dir has no node for, or whose node was deleted. A simulated node's devices
    are regular files: its registry (SIM_REGISTRY under sys_dir) keeps the ones deleted since.

    A device is reported by the path of its node under the real path of dev_dir.
    """

    def __init__(self, dev_dir, sys_dir="/sys", nvidia_dri=None, proc_root="/proc"):
        self.dev_dir = os.path.realpath(dev_dir)
        self._sys_dir = sys_dir
        self._is_nvidia_dri = nvidia_dri or SysfsDriNodes(sys_dir)
        self._by_identity = {}
        # {b" MAJ:MIN ": {b"INODE": device path}}: what a maps line shows for each known node.
        self.map_fields = {}
        self._majors = {}
        # {path: device} of the nodes that are regular files (a simulated node's): what their mappings show is read
        # from a mapping made here (_fields_as_mapped).
        self._regular = {}
        # The file types a device of this node can have (S_IFCHR, and S_IFREG on a simulated node).
        self.kinds = {stat_module.S_IFCHR}
        modes = set()
        for relative in self._node_names(self.dev_dir):
            st = self._add_node(os.path.join(self.dev_dir, relative), relative)
            modes.add(stat_module.S_IFMT(st.st_mode) if st is not None else None)
        registry = os.path.join(sys_dir, SIM_REGISTRY)
        for relative in self._node_names(registry):
            self._add_node(os.path.join(registry, relative), relative)
        for path, (dev_field, inode) in _fields_as_mapped_all(list(self._regular)).items():
            self.map_fields.setdefault(dev_field, {}).setdefault(inode, self._regular[path])
        if stat_module.S_IFCHR in modes or stat_module.S_IFREG not in modes:
            self._majors = _driver_majors(proc_root)
            self._name_by_number()

    def _name_by_number(self):
        """A character device of the driver's majors is reported by the name its number gives (nvidia<minor>),
        whatever its node under dev_dir is called."""
        renamed = {}
        for identity, device in self._by_identity.items():
            if identity[0] == "rdev":
                renamed[device] = self._by_number(identity[1]) or device
                self._by_identity[identity] = renamed[device]
        for inodes in self.map_fields.values():
            for inode, device in inodes.items():
                inodes[inode] = renamed.get(device, device)

    def _node_names(self, directory):
        """Paths relative to directory of the entries that name GPU devices (not followed below one level), the
        driver's own names first: a device with two nodes there is reported by the name the driver gives it."""
        try:
            entries = os.listdir(directory)
        except OSError:
            return []
        names = []
        for entry in sorted(entries, key=lambda entry: (_CANONICAL.match(entry) is None, entry)):
            if entry.startswith("nvidia"):
                path = os.path.join(directory, entry)
                if os.path.isdir(path):
                    names.extend(entry + "/" + sub for sub in sorted(_listdir(path)))
                else:
                    names.append(entry)
            elif entry == "dri":
                names.extend("dri/" + sub for sub in sorted(_listdir(os.path.join(directory, entry)))
                             if self._is_nvidia_dri(sub))
        return names

    def _add_node(self, path, relative):
        try:
            st = os.stat(path)
        except OSError:
            return None
        if stat_module.S_ISDIR(st.st_mode):
            return None
        device = os.path.join(self.dev_dir, relative)
        identity = device_identity(*_stat_fields(st))
        if identity is None:
            return None
        self._by_identity.setdefault(identity, device)
        self.kinds.add(stat_module.S_IFMT(st.st_mode))
        self.add_map_fields(st.st_dev, st.st_ino, device)
        if stat_module.S_ISREG(st.st_mode):
            self._regular[path] = device
        return st

    def add_map_fields(self, st_dev, st_ino, device):
        """Know the maps fields of a node of `device`: a mapping of that node is a mapping of the device."""
        dev_field, inode = _map_fields(st_dev, st_ino)
        self.map_fields.setdefault(dev_field, {}).setdefault(inode, device)

    def device(self, fields):
        """The device path of a file, from its stat fields (mode, ino, dev, rdev), when it is a GPU device of this
        node, else None."""
        identity = device_identity(*fields)
        if identity is None:
            return None
        found = self._by_identity.get(identity)
        if found is None and identity[0] == "rdev" and self._majors:
            found = self._by_number(identity[1])
            self._by_identity[identity] = found
        return found

    def _by_number(self, rdev):
        name = self._majors.get(os.major(rdev))
        if name is None:
            return None
        if name == "drm":
            # /sys/dev/char/MAJ:MIN links to the drm device: its name (card1, renderD128) says which card.
            try:
                node = os.path.basename(os.readlink(os.path.join(self._sys_dir, "dev", "char", "%d:%d" % (
                    os.major(rdev), os.minor(rdev)))))
            except OSError:
                return None
            return os.path.join(self.dev_dir, "dri", node) if self._is_nvidia_dri(node) else None
        return os.path.join(self.dev_dir, name(os.minor(rdev)))


def _fields_as_mapped(path):
    """(b" MAJ:MIN ", b"INODE") that a maps line shows for a mapping of the regular file at path, read from a
    mapping of it made here, or None. On overlayfs and btrfs they are not the numbers stat gives (a mapping shows
    the inode of the layer below, or the filesystem's own device number). Never called for a device: mapping one
    would be an act on the driver."""
    return _fields_as_mapped_all([path]).get(path)


def _fields_as_mapped_all(paths):
    """{path: _fields_as_mapped(path)} of the paths that could be mapped: all mapped at once, so that this
    process's own maps file (hundreds of lines in a Python that loaded a few libraries) is read once for all."""
    found = {}
    try:
        import ctypes  # only for a simulated node's regular files

        libc = ctypes.CDLL(None, use_errno=True)
        libc.mmap.restype = ctypes.c_void_p
        libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
        libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    except (ImportError, OSError, AttributeError):
        return found
    mapped = {}  # {address: path}
    try:
        for path in paths:
            try:
                fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
            except OSError:
                continue
            try:
                address = libc.mmap(None, 1, 0x1, 0x1, fd, 0)  # PROT_READ, MAP_SHARED
            finally:
                os.close(fd)
            if address not in (None, ctypes.c_void_p(-1).value):
                mapped[address] = path
        if mapped:
            for line in _read_all("/proc/self/maps").splitlines():
                fields = line.split(None, 5)
                path = mapped.get(int(fields[0].split(b"-")[0], 16)) if len(fields) >= 5 else None
                if path is not None:
                    found[path] = (b" %s " % fields[3], fields[4])
    except (OSError, ValueError):
        pass
    finally:
        for address in mapped:
            libc.munmap(address, 1)
    return found
