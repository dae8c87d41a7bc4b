# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Stop a container through the runtime its cgroup names: a killed process would only be restarted by it."""

from __future__ import annotations

import math

from ansible_collections.gpuops.remediation.plugins.module_utils._command import CommandRunner
from ansible_collections.gpuops.remediation.plugins.module_utils.probes._cgroup import own_cgroup

# runtime (as _cgroup.attribution names it) -> the CLI that stops its containers
RUNTIME_CLIS = {"docker": "docker", "podman": "podman", "containerd": "crictl", "cri-o": "crictl"}


def stop_argv(cli_path, runtime, container_id, grace):
    # The runtimes take whole seconds: round up, so a grace of 0.5 s never becomes an immediate SIGKILL.
    seconds = str(int(math.ceil(grace)))
    if RUNTIME_CLIS[runtime] == "crictl":
        return [cli_path, "stop", "--timeout", seconds, container_id]
    return [cli_path, "stop", "--time", seconds, container_id]


def runtime_cli(module, runtime):
    """(path of the CLI that stops containers of runtime or None, why not when None); check mode can ask it too."""
    cli = RUNTIME_CLIS.get(runtime)
    path = module.get_bin_path(cli) if cli else None
    if path is None:
        return None, "no CLI for container runtime %s (%s) on this node" % (runtime, cli or "unknown")
    return path, None


def own_container_refusal(runtime, container_id, proc_root="/proc"):
    """Why a container may not be stopped (it is the one this module runs in), or None."""
    if {"runtime": runtime, "id": container_id} in own_cgroup(proc_root).containers:
        return "%s container %s is the one this module runs in" % (runtime, container_id)
    return None


def predict_stop(module, runtime, container_id):
    """Check mode's (ok, message) for stop_container: what the real run would do, running nothing."""
    why_not = own_container_refusal(runtime, container_id) or runtime_cli(module, runtime)[1]
    return (False, why_not) if why_not else (True, "would stop")


def stop_container(module, runtime, container_id, grace, journal, sources=None):
    """Returns (ok, message): ok only when the runtime's CLI exited 0; when not, message is its error.

    Journals the intent before (with sources: what the journal keeps of the GPU holders in it) and the outcome after.
    The container this module runs in is never stopped.
    """
    why_not = own_container_refusal(runtime, container_id)
    if why_not is not None:
        return False, why_not
    path, why_not = runtime_cli(module, runtime)
    if path is None:
        return False, why_not
    argv = stop_argv(path, runtime, container_id, grace)
    rc, out, err = CommandRunner(module, journal).act(argv, "container_stop", runtime=runtime, container=container_id, sources=sources or [])
    message = (err or out).strip()
    if rc != 0 and not message:
        message = "%s stop exited with status %d" % (RUNTIME_CLIS[runtime], rc)
    return rc == 0, message
