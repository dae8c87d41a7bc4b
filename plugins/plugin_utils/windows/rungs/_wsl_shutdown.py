# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What wsl_shutdown does, on a Windows node (real or simulated, _remote_node): stop one WSL distribution
(wsl --terminate), all of them and the WSL VM (wsl --shutdown), or only what holds the GPU (gpu_holders: the plan of
_verdict.wsl_plan); only when something runs. Used by the action plugin wsl_shutdown and by the Windows ladder's wsl rung.

What happened is read from facts after each step, never from wsl.exe's exit status or words alone: a terminated
distribution is absent from `wsl --list --running --quiet`; after a shutdown, the WSL VM processes of the user recorded
before (pid + creation time, from Win32_Process) are gone and no distribution runs. A host without WSL is skipped,
saying why.
"""

from __future__ import annotations

from ansible_collections.gpuops.remediation.plugins.module_utils._verdict import wsl_plan, wsl_still_held
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.node import _node_journal
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.tools import _cim_processes, _wsl_cli
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows import _node_snapshot
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.node._remote_node import ConnectionDropped, WindowsNodeError

ARGUMENT_SPEC = {"distribution": {"type": "str"}, "gpu_holders": {"type": "bool", "default": False},
                 "journal_path": {"type": "str"}, "run_id": {"type": "str"}}


def checked(distribution, gpu_holders=False):
    """The distribution option, refused with a ValueError naming it when it could be read as an option or a list, or
    when gpu_holders is asked too."""
    if distribution is not None:
        try:
            _wsl_cli.checked_distribution_name(distribution)
        except ValueError as exc:
            raise ValueError("distribution: %s; nothing was stopped" % exc) from None
        if gpu_holders:
            raise ValueError("distribution: %r and gpu_holders: true are one or the other (gpu_holders picks the "
                             "distributions itself); nothing was stopped" % (distribution,))
    return distribution


def wsl_path(node):
    found = node.powershell("wsl_path", {"Path": _wsl_cli.STORE_WSL_PATH})
    return _wsl_cli.STORE_WSL_PATH if found.get("exists") else _wsl_cli.INBOX_WSL_PATH


def not_installed(node, path):
    """Why the host has no WSL to stop (wsl.exe cannot be started, or `wsl --status` exits with a "not installed"
    status), or None."""
    try:
        answer = node.command(_wsl_cli.status_argv(path), read_only=True)
    except ConnectionDropped:
        raise
    except WindowsNodeError as exc:
        return "WSL is not installed on the host: %s" % exc
    if _wsl_cli.not_installed(answer.rc, answer.stdout + answer.stderr):
        return "WSL is not installed on the host: %s --status exited %s" % (path, answer.rc)
    return None


def vms_now(node):
    """(the process list, its VM memory processes annotated by _wsl_vm_identity with wsl_mine) from the wsl_vms script."""
    answer = node.powershell("wsl_vms", {})
    try:
        processes = _cim_processes.parse_cim_processes(answer.get("processes") or "[]", _cim_processes.script_shell(answer))
    except ValueError as exc:
        raise WindowsNodeError("the process list is not readable, nothing was stopped: %s" % exc) from None
    return processes, _node_snapshot.wsl_vms(processes, answer, {}, getattr(node, "user", None))


def running(node, path, processes=None):
    """The running distributions of the node's user; the process list (given, else read) decides only where wsl.exe's
    exit is not 0."""
    probes = {}
    vm_running = (lambda: _node_snapshot.vm_running(processes)) if processes is not None else (lambda: _node_snapshot.vm_running(vms_now(node)[0]))
    listed = _node_snapshot.running_distributions(node, path, probes, vm_running)
    if listed["status"] != "ok":
        raise WindowsNodeError("wsl.exe's list of running distributions is not readable: %s" % listed["message"])
    return listed["running"]


def identity(process):
    return (process["pid"], process.get("creation_time_ms"))


def mine(vms):
    """The node user's WSL VMs: what wsl --shutdown stops, and what must be gone after it."""
    return [vm for vm in vms if vm.get("vm_kind") == "wsl" and vm.get("wsl_mine")]


def plan(node, distribution, gpu_holders, before, vms, journal_path):
    """(terminate: [(argv name, running name)], shutdown: bool, reason, left lines): what runs, from the facts before."""
    if gpu_holders:
        decided = wsl_plan(_node_snapshot.take(node, journal_path=journal_path))
        names = [name for name in decided["terminate"] if name in before]
        return [(name, name) for name in names], decided["shutdown"], decided["reason"], decided["left"]
    if distribution is not None:
        return [(distribution, name) for name in before if name.lower() == distribution.lower()][:1], False, None, []
    return [], bool(before or mine(vms)), None, []


def stop(node, distribution, check_mode, journal_path=None, run_id=None, gpu_holders=False):
    """The module's result: what ran (or would), what was running before and after, the WSL VMs before and after, the
    journal lines it wrote on the host and the earlier runs' interrupted actions; failed when the facts after a step
    say it did not stop what it stopped."""
    checked(distribution, gpu_holders)
    journal = _node_journal.WindowsJournal(node, journal_path, run_id)
    interrupted = journal.interrupted(check_mode)
    path = wsl_path(node)
    outcome = {"changed": False, "stopped": [], "running_before": [], "running_after": [], "wsl_path": path, "command": None,
               "commands": [], "vms_before": [], "vms_after": [], "reason": None, "left": [], "simulated": node.simulated,
               "interrupted_actions": interrupted}
    absent = not_installed(node, path)
    if absent:
        outcome.update(skipped=True, skip_reason=absent, msg=absent, journal=journal.entries())
        return outcome
    processes, vms = vms_now(node)
    before = running(node, path, processes)
    recorded = mine(vms)
    terminate, shutdown, reason, left = plan(node, distribution, gpu_holders, before, vms, journal_path)
    stopping = [name for dummy, name in terminate] + ([name for name in before if name not in [n for d, n in terminate]] if shutdown else [])
    commands = [_wsl_cli.terminate_argv(arg, path) for arg, dummy in terminate] + ([_wsl_cli.shutdown_argv(path)] if shutdown else [])
    outcome.update(running_before=before, vms_before=[_node_snapshot.vm_record(vm) for vm in vms], reason=reason, left=left,
                   stopped=stopping, commands=commands, command=commands[-1] if commands else None, changed=bool(commands))
    if commands and check_mode:
        journal.check()  # the real run's first journal line would be refused the same way, before anything is stopped
    if not commands or check_mode:
        outcome.update(running_after=[name for name in before if name not in stopping], vms_after=outcome["vms_before"]
                       if not shutdown else [vm for vm in outcome["vms_before"] if not vm["wsl_mine"] or vm["vm_kind"] != "wsl"],
                       journal=journal.entries())
        return outcome
    failures = []
    for arg, name in terminate:
        failures += _terminate(node, journal, path, arg, name)
        if failures:
            break  # a step the facts say failed ends the run: nothing heavier follows it
    if failures:
        shutdown = False
    elif gpu_holders and not shutdown and recorded:
        still = _still_holding(node, recorded, journal_path)
        if still:
            shutdown = True
            outcome["reason"] = "WSL VM pid %s still holds GPU memory after the terminate" % still[0]["pid"]
            outcome["stopped"] = before[:]
            outcome["commands"].append(_wsl_cli.shutdown_argv(path))
            outcome["command"] = outcome["commands"][-1]
    if shutdown:
        failures += _shutdown(node, journal, path, recorded, [name for name in before if name not in [n for d, n in terminate]])
    outcome["journal"] = journal.entries()
    try:
        processes, vms = vms_now(node)
        outcome.update(running_after=running(node, path, processes), vms_after=[_node_snapshot.vm_record(vm) for vm in vms])
    except WindowsNodeError as exc:
        outcome.update(running_after=None, vms_after=None)
        failures = failures or ["what is running after is not known: %s" % exc]
    if failures:
        outcome.update(failed=True, msg="; ".join(failures))
    return outcome


def _terminate(node, journal, path, arg, name):
    argv = _wsl_cli.terminate_argv(arg, path)
    facts = {}

    def judge(answer):
        facts.update(report=_wsl_cli.exit_report(answer.rc, answer.stdout + answer.stderr))
        try:
            facts["gone"] = name not in running(node, path)
        except WindowsNodeError as exc:
            facts.update(gone=False, report="%s; what it did is not known: %s" % (facts["report"] or "wsl.exe exited 0", exc))
        return facts["gone"], {"rc": answer.rc, "message": facts["report"], "still_running": [name] if not facts["gone"] else []}
    journal.around("wsl_terminate", lambda: node.command(argv), judge, argv=argv, distribution=arg, stopping=[name])
    if facts["gone"]:
        return []
    return ["%s did not stop %s: it is still running (%s)" % (" ".join(argv), name, facts["report"] or "wsl.exe exited 0")]


def _shutdown(node, journal, path, recorded, stopping):
    argv = _wsl_cli.shutdown_argv(path)
    facts = {}

    def judge(answer):
        facts.update(report=_wsl_cli.exit_report(answer.rc, answer.stdout + answer.stderr), vms=[], running=[])
        try:
            processes, dummy = vms_now(node)
            alive = set(identity(p) for p in processes)
            facts.update(vms=[vm for vm in recorded if identity(vm) in alive], running=running(node, path, processes))
        except WindowsNodeError as exc:
            facts.update(running=["(not known: %s)" % exc])
        ok = not facts["vms"] and not facts["running"]
        return ok, {"rc": answer.rc, "message": facts["report"], "still_running": facts["running"],
                    "vms_left": [vm["pid"] for vm in facts["vms"]]}
    journal.around("wsl_shutdown", lambda: node.command(argv), judge, argv=argv, distribution=None, stopping=stopping,
                   vms=[{"pid": vm["pid"], "creation_time_ms": vm.get("creation_time_ms")} for vm in recorded])
    problems = []
    if facts["vms"]:
        problems.append("WSL VM %s still runs" % ", ".join("pid %s" % vm["pid"] for vm in facts["vms"]))
    if facts["running"]:
        problems.append("%s still running" % ", ".join(facts["running"]))
    return ["%s did not stop WSL: %s (%s)" % (" ".join(argv), "; ".join(problems), facts["report"] or "wsl.exe exited 0")] if problems else []


def _still_holding(node, recorded, journal_path):
    """The node user's WSL VMs recorded before (same pid and creation time) that hold a GPU now (_verdict.wsl_still_held)."""
    return wsl_still_held(_node_snapshot.take(node, journal_path=journal_path), recorded)
