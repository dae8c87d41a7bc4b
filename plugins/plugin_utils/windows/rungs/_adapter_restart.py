# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""win_gpu_reset method=restart_adapter: `pnputil /restart-device <instance id>` on the one adapter of each chosen GPU
that needs it (joined by PCI location; never `/class Display`); exit 3010 waits for a reboot; a dropped connection is
judged by the node afterwards."""

from __future__ import annotations

from ansible_collections.gpuops.remediation.plugins.module_utils.probes._pci import normalize_bus_id
from ansible_collections.gpuops.remediation.plugins.module_utils._verdict import reset_evidence
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.rungs import _acting_step
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.tools import _pnputil_adapters
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.protect import _who_may_end
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows import _node_snapshot


def act(node, args, check_mode, sleep, journal):
    before = _node_snapshot.take(node, args["nvidia_smi"], args["ghost_threshold_mib"], args["journal_path"])
    chosen = _chosen_gpus(before, args["gpu"])
    entries = [_adapter_plan(before, gpu, args) for gpu in chosen]
    dropped = False
    for entry in entries:
        if entry["outcome"] == "restart" and not check_mode:
            dropped = _restart_one(node, journal, entry, args, sleep) or dropped
    if not check_mode and any(e["outcome"] in ("restarted", "reboot_required", "unknown") for e in entries):
        _judge_restarts(node, entries, args)
    for entry in entries:
        entry["line"] = _adapter_line(entry, check_mode)
    failures = [e for e in entries if e["outcome"] in ("failed", "unsupported", "no_adapter", "refused")]
    result = {"changed": any(e["outcome"] in ("restart", "restarted", "reboot_required") for e in entries),
              "adapters": entries, "reboot_required": any(e["reboot_required"] for e in entries),
              "connection_dropped": dropped, "plan": [e["line"] for e in entries] or ["no GPU needs an adapter restart"]}
    if failures:
        result["msg"] = "; ".join(e["line"] for e in failures)
    return result


def _chosen_gpus(snapshot, wanted):
    """The GPUs `gpu` names (index, UUID or PCI bus id), or every GPU when unset (those that need it are restarted); an
    empty list selects none (only the option left out means every GPU)."""
    if wanted is None:
        return list(snapshot["gpus"])
    if isinstance(wanted, (list, tuple)) and not wanted:
        return []
    text = str(wanted).strip()
    bus = normalize_bus_id(text) if not text.isdigit() else None
    for gpu in snapshot["gpus"]:
        if (text.isdigit() and gpu["index"] == int(text)) or (gpu.get("uuid") or "").lower() == text.lower() \
                or (bus is not None and gpu.get("pci_bus_id") == bus):
            return [gpu]
    known = ", ".join("%s (%s, %s)" % (g["index"], g.get("uuid"), g.get("pci_bus_id")) for g in snapshot["gpus"]) or "none"
    raise _acting_step.WinResetInputError("gpu: %r names no GPU of the node (its GPUs: %s)" % (wanted, known))


def _adapter_plan(snapshot, gpu, args):
    reason = reset_evidence(gpu, [], args["ghost_threshold_mib"]) or ("force=true" if args["force"] else None)
    adapters = [a for a in snapshot["adapters"] if a.get("gpu") == gpu["index"]]
    join = snapshot["probes"].get("adapter_join") or {}
    display = any(gpu["index"] in (h.get("gpus") or []) and h["class"] == "graphics_session" for h in snapshot["holders"])
    entry = {"gpu": gpu["index"], "name": gpu.get("name"), "reason": reason, "display": display,
             "instance_id": adapters[0]["instance_id"] if len(adapters) == 1 else None, "argv": None, "rc": None,
             "adapter_join": join.get("method"), "reboot_required": False, "message": None, "connection_dropped": False}
    if reason is None:
        return dict(entry, outcome="not_needed", reason="nothing asks for a restart (state %s)" % gpu.get("state"))
    policy = _who_may_end.Policy.from_args(args)
    protected = ["%s: %s" % (_who_may_end.label(h), why) for h, why in ((h, _who_may_end.caller_refusal(h, policy))
                 for h in snapshot["holders"] if gpu["index"] in (h.get("gpus") or [])) if why]
    if protected:
        return dict(entry, outcome="refused", message="the restart would take the GPU from protected processes too: %s" % "; ".join(protected))
    if entry["instance_id"] is None:
        return dict(entry, outcome="no_adapter", message="%d PnP display adapters are joined to it, not one (joined by %s: %s)" % (
            len(adapters), join.get("method"), join.get("error")))
    try:
        argv = _pnputil_adapters.restart_device_argv(entry["instance_id"])
    except ValueError as exc:
        return dict(entry, outcome="no_adapter", message="pnputil cannot be given its adapter's id (%s)" % exc)
    return dict(entry, outcome="restart", argv=argv)


def _restart_one(node, journal, entry, args, sleep):
    def judge(answer):
        done = _pnputil_adapters.restart_outcome(answer.rc, answer.stdout + answer.stderr)
        return done["outcome"] in ("restarted", "reboot_required"), {"rc": answer.rc, "outcome": done["outcome"],
                                                                     "reboot_required": done["reboot_required"]}
    answer, dropped = _acting_step.journaled_drop(node, journal, "restart_adapter", entry, "the restart of %s" % entry["instance_id"], args,
                                                  sleep, judge, gpu=entry["gpu"], instance_id=entry["instance_id"], reason=entry["reason"])
    if dropped:
        # pnputil's exit code is lost with the connection: the adapter's state afterwards decides.
        entry.update(outcome="unknown", connection_dropped=True, reboot_required=None)
        return True
    done = _pnputil_adapters.restart_outcome(answer.rc, answer.stdout + answer.stderr)
    entry.update(rc=answer.rc, outcome=done["outcome"], reboot_required=done["reboot_required"], message=done["message"])
    return False


def _judge_restarts(node, entries, args):
    """After the restart: the adapter is started again (and, when the connection dropped, the GPU no longer needs it)."""
    after = _node_snapshot.take(node, args["nvidia_smi"], args["ghost_threshold_mib"], args["journal_path"])
    for entry in entries:
        if entry["outcome"] not in ("restarted", "reboot_required", "unknown"):
            continue
        adapter = next((a for a in after["adapters"] if a["instance_id"].lower() == entry["instance_id"].lower()), None)
        gpu = next((g for g in after["gpus"] if g["index"] == entry["gpu"]), None)
        problem = adapter_problem(adapter)
        if not problem and not adapter.get("state_known") and not entry["message"]:
            entry["message"] = "its state afterwards not known: Get-PnpDevice did not answer (pnputil's exit code decided)"
        if problem:
            entry.update(outcome="failed", message="the adapter is %s after the restart" % problem)
        elif entry["outcome"] == "unknown":
            still = gpu is not None and reset_evidence(gpu, [], args["ghost_threshold_mib"])
            entry.update(outcome="failed" if still else "restarted",
                         message="the connection dropped; after it: %s" % (still or "the adapter reports no problem, the GPU no longer needs a restart"))


def adapter_problem(adapter):
    """What is wrong with an adapter after its restart, from numbers (Win32_PnPEntity's ConfigManagerErrorCode and
    Present; pnputil's problem code line where Get-PnpDevice did not answer), never from a status word; None when nothing
    is."""
    if adapter is None:
        return "gone (no display device has its instance id)"
    if adapter.get("present") is False:
        return "not present"
    if adapter.get("problem_code"):
        return "stopped with problem code %s (%s)" % (adapter["problem_code"], adapter.get("status") or "no status")
    return None


def _adapter_line(entry, check_mode):
    gpu = "GPU %s (%s)" % (entry["gpu"], entry["name"])
    if entry["outcome"] == "not_needed":
        return "left %s: %s" % (gpu, entry["reason"])
    if entry["outcome"] == "refused":
        return "left %s: %s" % (gpu, entry["message"])
    if entry["outcome"] == "no_adapter":
        return "could not restart %s: %s" % (gpu, entry["message"])
    display = "; it drives the display, the connection may drop" if entry["display"] else ""
    how = "with pnputil /restart-device %s (%s)%s" % (entry["instance_id"], entry["reason"], display)
    if check_mode:
        return "would restart the adapter of %s %s" % (gpu, how)
    verb = {"restarted": "restarted the adapter of", "reboot_required": "restarted, pending a reboot (exit 3010), the adapter of"}
    line = "%s %s %s" % (verb.get(entry["outcome"], "could not restart the adapter of"), gpu, how)
    return line + (": %s" % entry["message"] if entry["message"] and entry["outcome"] != "reboot_required" else "")
