# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Stop a container through the runtime its cgroup names: a killed process would only be restarted by it."""

from __future__ import annotations

import math

# runtime (as _procscan.attribution names it) -> the CLI that stops its containers
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


def stop_container(module, runtime, container_id, grace, journal):
    """Returns (ok, message). Journals the intent before and the outcome after."""
    path, why_not = runtime_cli(module, runtime)
    if path is None:
        return False, why_not
    argv = stop_argv(path, runtime, container_id, grace)
    entry = journal.intent("container_stop", runtime=runtime, container=container_id, argv=argv)
    rc, out, err = module.run_command(argv)
    journal.outcome(entry, rc == 0, rc=rc, stderr=err.strip())
    return rc == 0, (err or out).strip()
