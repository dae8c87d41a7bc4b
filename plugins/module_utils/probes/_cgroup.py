# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which container, Kubernetes pod, Slurm job and systemd unit a process runs in, read from its cgroup paths
(parse_cgroup, attribution); a process in the module's own container is not "in a container" (OwnCgroup)."""

from __future__ import annotations

import re

try:
    from ansible_collections.gpuops.remediation.plugins.module_utils.probes._proc_files import _read_all
except ImportError:  # copied flat into a simulated node's lib/, or run on its own
    from _proc_files import _read_all  # type: ignore[no-redef] # pylint: disable=import-error

_HEX_ID = r"([0-9a-f]{64})"
# (pattern over one path component, runtime); the id is group 1.
_CONTAINER_COMPONENTS = (
    (re.compile(r"^docker-%s\.scope$" % _HEX_ID), "docker"),
    (re.compile(r"^cri-containerd-%s\.scope$" % _HEX_ID), "containerd"),
    (re.compile(r"^nerdctl-%s\.scope$" % _HEX_ID), "containerd"),
    (re.compile(r"^.*:cri-containerd:%s$" % _HEX_ID), "containerd"),
    (re.compile(r"^crio-(?:conmon-)?%s(?:\.scope)?$" % _HEX_ID), "cri-o"),
    (re.compile(r"^libpod-(?:conmon-|payload-)?%s(?:\.scope)?$" % _HEX_ID), "podman"),
)
_BARE_ID = re.compile(r"^%s$" % _HEX_ID)
# pod<uid> (cgroupfs), kubepods-<qos>-pod<uid with underscores>.slice (systemd), static pods' 32-hex uids,
# and the kubepods-...-pod<uid>.slice:cri-containerd:<id> form of a containerd with a mismatched driver.
_POD_UID = re.compile(r"(?:^|-)pod([0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12}|[0-9a-f]{32})"
                      r"(?:\.slice)?(?:$|:)")
_SLURM_JOB = re.compile(r"^job_(\d+)$")
_SLURM_PARENT = re.compile(r"^(?:uid_\d+|(?:.+_)?slurmstepd\.scope)$")
_UNIT_SUFFIXES = (".service", ".scope")


def _cgroup_lines(text):
    """[(hierarchy, controllers, path)] of the lines of /proc/<pid>/cgroup, the systemd ones first."""
    preferred = []
    others = []
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3 or not parts[2].startswith("/"):
            continue
        hierarchy, controllers, _path = parts
        systemd = (hierarchy == "0" and controllers == "") or controllers == "name=systemd"
        (preferred if systemd else others).append(tuple(parts))
    return preferred + others, preferred


class OwnCgroup:
    """The cgroups of the process that runs the scan: a holder is in a container only when that container is
    not the one this process runs in (the Ansible target itself may be a container).

    Each line of a holder is read below this process's own cgroup of the same hierarchy, and a container seen
    in any of this process's lines (a runtime may show in some controllers only) is its own.
    """

    def __init__(self, text=""):
        lines, _systemd = _cgroup_lines(text)
        self.paths = dict(((hierarchy, controllers), _components(path)) for hierarchy, controllers, path in lines)
        self.containers = []
        for components in self.paths.values():
            container = _container(components)
            if container and container not in self.containers:
                self.containers.append(container)

    def below(self, hierarchy, controllers, components):
        """The components of a holder's path below our own cgroup of that hierarchy; all when not below it."""
        own = self.paths.get((hierarchy, controllers))
        if own and components[:len(own)] == own:
            return components[len(own):]
        return components


def _container(components):
    """{"runtime", "id"} of the innermost container in one cgroup path, or None."""
    for index in range(len(components) - 1, -1, -1):
        component = components[index]
        for pattern, runtime in _CONTAINER_COMPONENTS:
            match = pattern.match(component)
            if match:
                return {"runtime": runtime, "id": match.group(1)}
        if _BARE_ID.match(component) and index > 0:
            parent = components[index - 1]
            if parent == "docker":
                return {"runtime": "docker", "id": component}
            if _POD_UID.search(parent):
                # cgroupfs driver under kubepods: the CRI runtime (containerd since dockershim left).
                return {"runtime": "containerd", "id": component}
    return None


def _pod_uid(components):
    if not any(component.startswith("kubepods") or "-kubepods" in component for component in components):
        return None
    for component in components:
        match = _POD_UID.search(component)
        if match:
            uid = match.group(1).replace("_", "-")
            return uid
    return None


def _slurm_job(components):
    for index in range(1, len(components)):
        match = _SLURM_JOB.match(components[index])
        if match and _SLURM_PARENT.match(components[index - 1]):
            return match.group(1)
    return None


def _is_container_component(component):
    return any(pattern.match(component) for pattern, _runtime in _CONTAINER_COMPONENTS)


def _systemd_unit(components):
    """The innermost .service/.scope unit, unless a container scope sits below it."""
    for component in reversed(components):
        if _is_container_component(component):
            return None
        if component.endswith(_UNIT_SUFFIXES):
            return component
    return None


def parse_cgroup(text, own=None):
    """Attribution from the text of /proc/<pid>/cgroup (v1 and v2 lines); see attribution().

    own: an OwnCgroup; the container is then one other than the one it names (None when it is the same).
    """
    result = {"container": None, "kubernetes_pod_uid": None, "slurm_job": None, "systemd_unit": None}
    lines, systemd_lines = _cgroup_lines(text)
    for hierarchy, controllers, path in lines:
        components = _components(path)
        if result["container"] is None:
            result["container"] = _container(own.below(hierarchy, controllers, components) if own else components)
        if result["kubernetes_pod_uid"] is None:
            result["kubernetes_pod_uid"] = _pod_uid(components)
        if result["slurm_job"] is None:
            result["slurm_job"] = _slurm_job(components)
    if own is not None and result["container"] in own.containers:
        result["container"] = None
    # Units live in the systemd hierarchy: the v2 line, or name=systemd on v1 (any line when neither is there).
    for _hierarchy, _controllers, path in systemd_lines or lines:
        result["systemd_unit"] = _systemd_unit(_components(path))
        if result["systemd_unit"]:
            break
    return result


def _components(path):
    return [component for component in path.split("/") if component]


_OWN_CGROUP = {}


def _read_cgroup(path):
    try:
        return _read_all(path).decode("utf-8", "replace")
    except OSError:
        return ""


def own_cgroup(proc_root="/proc"):
    """The OwnCgroup of this process, read once per process (a forked child is in the same cgroups)."""
    if proc_root not in _OWN_CGROUP:
        _OWN_CGROUP[proc_root] = OwnCgroup(_read_cgroup(proc_root + "/self/cgroup"))
    return _OWN_CGROUP[proc_root]


def attribution(pid, proc_root="/proc"):
    """{"container": {"runtime", "id"}|None, "kubernetes_pod_uid", "slurm_job", "systemd_unit"} of a process.

    The container is one other than the container this process runs in (own_cgroup()): a process in the
    module's own container is not "in a container". All None when the process is gone or its cgroup file
    cannot be read.
    """
    return parse_cgroup(_read_cgroup("%s/%d/cgroup" % (proc_root, pid)), own_cgroup(proc_root))
