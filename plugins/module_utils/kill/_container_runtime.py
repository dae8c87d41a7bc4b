# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Is a process in the container its cgroup names? Only the container's runtime can say so.

A cgroup path is only a name: any user can create `docker-<id>.scope` in the subtree systemd delegates to them
(`user@UID.service`), move a process there, and name a real container, whose id everyone can read. A claimed
container (what `_cgroup.attribution` read from the path) is confirmed only when:

1. the runtime knows the id and runs it, and names its main process (`docker|podman container inspect`:
   `State.Running`, `State.Pid`; `crictl inspect`: `status.state`, `info.pid`);
2. the runtime's own cgroup for it, the cgroup of that main process, names the same container and lies in no user's
   delegated subtree (`user@UID.service`);
3. the process's cgroup is that cgroup or one below it, in every hierarchy both show: the kernel put it there, and only
   root can move a process into a cgroup the runtime created. Such a process is one of the container's (the runtime's
   `top` lists the same cgroup).

Anything else is a plain process. `ContainerWitness.confirm` is the one place that decides; the kill path and the
classes (a running container with its main process alive) ask it.
"""

from __future__ import annotations

import json
import os
import re

from ansible_collections.gpuops.remediation.plugins.module_utils._command import CommandRunner
from ansible_collections.gpuops.remediation.plugins.module_utils.kill._containers import RUNTIME_CLIS, runtime_cli
from ansible_collections.gpuops.remediation.plugins.module_utils.probes._deadline import ProbeFailed, ProbeTimeout
from ansible_collections.gpuops.remediation.plugins.module_utils.probes._cgroup import _container, parse_cgroup
from ansible_collections.gpuops.remediation.plugins.module_utils.probes._process import read_process

USER_DELEGATED = re.compile(r"^user@\d+\.service$")
DEFAULT_TIMEOUT = 10.0  # seconds for the runtime's answer when the module has no probe_timeout


def inspect_argv(cli_path, runtime, container_id):
    """The argv that asks the runtime about one container (read only)."""
    if RUNTIME_CLIS[runtime] == "crictl":
        return [cli_path, "inspect", "--output", "json", container_id]
    return [cli_path, "container", "inspect", container_id]


def _runtime_error(runtime, rc, out, err):
    text = (err or out or "").strip().splitlines()
    return "%s inspect exited with status %d%s" % (RUNTIME_CLIS[runtime], rc, (": " + text[-1]) if text else "")


def parse_inspect(runtime, container_id, rc, out, err=""):
    """(state, None) or (None, why not) from the runtime's inspect answer.

    state: {"id", "running": bool, "pid": int|None (the main process, host pid), "host_pid_namespace": bool}. The
    runtime matches prefixes and names too: only an answer for exactly this id counts.
    """
    if rc != 0:
        return None, _runtime_error(runtime, rc, out, err)
    try:
        data = json.loads(out)
    except ValueError:
        return None, "%s inspect printed no JSON" % RUNTIME_CLIS[runtime]
    if RUNTIME_CLIS[runtime] == "crictl":
        return _parse_crictl(container_id, data)
    entries = [entry for entry in (data if isinstance(data, list) else [data])
               if isinstance(entry, dict) and entry.get("Id") == container_id]
    if not entries:
        return None, "%s knows no container %s" % (runtime, container_id)
    state = entries[0].get("State") or {}
    host_config = entries[0].get("HostConfig") or {}
    return {"id": container_id, "running": state.get("Running") is True, "pid": _pid(state.get("Pid")),
            "host_pid_namespace": host_config.get("PidMode") == "host"}, None


def _parse_crictl(container_id, data):
    status = (data or {}).get("status") or {} if isinstance(data, dict) else {}
    if status.get("id") != container_id:
        return None, "crictl knows no container %s" % container_id
    info = data.get("info") or {}
    namespaces = ((info.get("runtimeSpec") or {}).get("linux") or {}).get("namespaces") or []
    own_pid_ns = any(isinstance(ns, dict) and ns.get("type") == "pid" for ns in namespaces)
    return {"id": container_id, "running": status.get("state") == "CONTAINER_RUNNING", "pid": _pid(info.get("pid")),
            "host_pid_namespace": bool(namespaces) and not own_pid_ns}, None


def _pid(value):
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _lines(text):
    """{(hierarchy, controllers): [components]} of a /proc/<pid>/cgroup text."""
    lines = {}
    for line in (text or "").splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3 and parts[2].startswith("/"):
            lines[(parts[0], parts[1])] = [component for component in parts[2].split("/") if component]
    return lines


def _path(components):
    return "/" + "/".join(components)


def delegated_subtree(cgroup_text):
    """The path of the first line that lies in a user's delegated subtree (user@UID.service), or None."""
    for components in _lines(cgroup_text).values():
        if any(USER_DELEGATED.match(component) for component in components):
            return _path(components)
    return None


def container_root(components, claimed):
    """The components of the cgroup that names the container `claimed`, out of a path at or below it: a main process
    may sit in a cgroup of its own below the container's (systemd in a container moves itself to init.scope)."""
    for length in range(1, len(components) + 1):
        if _container(components[:length]) == claimed:
            return components[:length]
    return components


def within(holder_cgroup, container_cgroup, claimed=None):
    """None when every hierarchy both texts show puts the holder at or below the container's cgroup (with `claimed`, the
    cgroup that names that container above the given one), else why not."""
    holder, container = _lines(holder_cgroup), _lines(container_cgroup)
    if claimed:
        container = dict((key, container_root(components, claimed)) for key, components in container.items())
    # The hierarchy that names units first (name=systemd on v1, the unified one), so that the reason names that path.
    common = sorted(set(holder) & set(container), key=lambda key: (key[1] != "name=systemd", key != ("0", ""), key))
    if not common:
        return "no cgroup hierarchy in common with the container's main process"
    for key in common:
        if holder[key][:len(container[key])] != container[key]:
            return "its cgroup %s is not the container's %s" % (_path(holder[key]), _path(container[key]))
    return None


def judge(claimed, state, why_no_state, holder_cgroup, main_cgroup):
    """(confirmed, reason): the pure decision, from the runtime's answer and the two /proc/<pid>/cgroup texts.

    claimed: {"runtime", "id"} as the holder's cgroup path names it; state: parse_inspect()'s state or None;
    main_cgroup: the cgroup text of state["pid"] ("" when that process is gone).
    """
    runtime, container_id = claimed["runtime"], claimed["id"]
    if state is None:
        return False, why_no_state
    if not state["running"] or state["pid"] is None:
        return False, "%s says container %s is not running" % (runtime, container_id)
    if not main_cgroup:
        return False, "the main process %d that %s names is gone" % (state["pid"], runtime)
    delegated = delegated_subtree(main_cgroup)
    if delegated:
        return False, "the container's cgroup %s lies in a user's delegated subtree" % delegated
    if parse_cgroup(main_cgroup)["container"] != {"runtime": runtime, "id": container_id}:
        return False, "the main process %d that %s names is not in that container's cgroup" % (state["pid"], runtime)
    delegated = delegated_subtree(holder_cgroup)
    if delegated:
        return False, "its cgroup %s lies in a user's delegated subtree" % delegated
    outside = within(holder_cgroup, main_cgroup, {"runtime": runtime, "id": container_id})
    if outside:
        return False, "%s (that of main process %d, as %s names it)" % (outside, state["pid"], runtime)
    return True, "%s runs container %s with main process %d, and this process is in its cgroup" % (
        runtime, container_id, state["pid"])


def _read(path):
    try:
        with open(path, "rb") as handle:
            return handle.read().decode("utf-8", "replace")
    except OSError:
        return ""


def _pid_namespace(pid, proc_root):
    try:
        return os.readlink("%s/%d/ns/pid" % (proc_root, pid))
    except OSError:
        return None


class ContainerWitness:
    """Asks each runtime once per container per run (inspect is read only: check mode asks it too)."""

    def __init__(self, module, proc_root="/proc"):
        self.module = module
        self.proc_root = proc_root
        self._states = {}

    def inspect(self, runtime, container_id):
        """(state, None) or (None, why not)."""
        key = (runtime, container_id)
        if key not in self._states:
            if runtime not in RUNTIME_CLIS:
                self._states[key] = (None, "no CLI for container runtime %s on this node" % runtime)
            else:
                path, why_not = runtime_cli(self.module, runtime)
                if path is None:
                    self._states[key] = (None, why_not)
                else:
                    self._states[key] = self._ask(runtime, container_id, inspect_argv(path, runtime, container_id))
        return self._states[key]

    def _ask(self, runtime, container_id, argv):
        """The runtime's answer, in a child under the probe deadline: a daemon that hangs confirms nothing."""
        timeout = (self.module.params or {}).get("probe_timeout") or DEFAULT_TIMEOUT
        try:
            rc, out, err = CommandRunner(self.module).probe(argv, timeout=timeout)
        except ProbeTimeout:
            return None, "%s inspect did not answer within %s s" % (RUNTIME_CLIS[runtime], timeout)
        except ProbeFailed as exc:
            return None, "%s inspect failed: %s" % (RUNTIME_CLIS[runtime], exc)
        return parse_inspect(runtime, container_id, rc, out, err)

    def confirm(self, pid, claimed):
        """{"runtime", "id", "confirmed", "reason", "main_pid", "main_start_time", "same_pid_namespace"} for a process
        whose cgroup path names the container `claimed` ({"runtime", "id"}).

        main_pid and main_start_time are the container's main process when the runtime named one that runs; a caller
        that needs "its container runs with its main process alive" reads confirmed and main_pid.
        """
        state, why_not = self.inspect(claimed["runtime"], claimed["id"])
        main_pid = state["pid"] if state else None
        main_cgroup = _read("%s/%d/cgroup" % (self.proc_root, main_pid)) if main_pid else ""
        confirmed, reason = judge(claimed, state, why_not, _read("%s/%d/cgroup" % (self.proc_root, pid)), main_cgroup)
        main = read_process(main_pid, self.proc_root) if main_pid and main_cgroup else None
        same_ns = None
        if main is not None:
            mine, theirs = _pid_namespace(pid, self.proc_root), _pid_namespace(main_pid, self.proc_root)
            same_ns = None if mine is None or theirs is None else mine == theirs
        return {"runtime": claimed["runtime"], "id": claimed["id"], "confirmed": confirmed, "reason": reason,
                "main_pid": main["pid"] if main else None, "main_start_time": main["start_time"] if main else None,
                "same_pid_namespace": same_ns}

    def members(self, confirmation, holders):
        """The holders (snapshot records) that a stop of the confirmed container ends: those in its cgroup or below,
        and those in its own PID namespace (the kernel ends them all when its init exits)."""
        main_pid = confirmation.get("main_pid")
        if not confirmation.get("confirmed") or not main_pid:
            return []
        main_cgroup = _read("%s/%d/cgroup" % (self.proc_root, main_pid))
        main_ns = _pid_namespace(main_pid, self.proc_root)
        if main_ns is not None and main_ns == _pid_namespace(os.getpid(), self.proc_root):
            main_ns = None  # the host's namespace (PidMode host): the stop ends only what is in its cgroup
        found = []
        for holder in holders:
            if not holder.get("visible", True):
                continue
            cgroup = _read("%s/%d/cgroup" % (self.proc_root, holder["pid"]))
            claimed = {"runtime": confirmation["runtime"], "id": confirmation["id"]}
            if (cgroup and main_cgroup and within(cgroup, main_cgroup, claimed) is None) or (
                    main_ns is not None and _pid_namespace(holder["pid"], self.proc_root) == main_ns):
                found.append(holder)
        return found


def namespace_init(pid, proc_root="/proc"):
    """Whether pid is the init (pid 1) of a PID namespace below this one: ending it ends every process of that
    namespace (the kernel kills them when its init exits). From NSpid in /proc/<pid>/status."""
    for line in _read("%s/%d/status" % (proc_root, pid)).splitlines():
        if line.startswith("NSpid:"):
            ids = line.split()[1:]
            return len(ids) > 1 and ids[-1] == "1"
    return False


def namespace_members(pid, holders, proc_root="/proc"):
    """The holders (snapshot records) in the PID namespace whose init is pid; [] when pid is no such init."""
    if not namespace_init(pid, proc_root):
        return []
    namespace = _pid_namespace(pid, proc_root)
    return [holder for holder in holders if holder.get("visible", True) and holder["pid"] != pid
            and namespace is not None and _pid_namespace(holder["pid"], proc_root) == namespace]


def confirm_holders(module, holders, witness=None):
    """The snapshot's containers, confirmed: a holder keeps `container` ({"runtime", "id", "main_pid"}) only when its
    runtime confirms it; otherwise `container` is None and `container_claim` ({"runtime", "id", "reason"}) keeps what
    its cgroup path named and why that is not a container. Returns the witness (its answers are cached)."""
    witness = witness or ContainerWitness(module)
    for holder in holders:
        claimed = holder.get("container")
        if not claimed:
            continue
        confirmation = witness.confirm(holder["pid"], claimed)
        if confirmation["confirmed"]:
            holder["container"] = dict(claimed, main_pid=confirmation["main_pid"])
        else:
            holder["container"] = None
            holder["container_claim"] = dict(claimed, reason=confirmation["reason"])
    return witness
