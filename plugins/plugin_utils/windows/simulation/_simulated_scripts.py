# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The simulated Windows node's answers to the named PowerShell scripts (_powershell_scripts): ConvertTo-Json as Windows
PowerShell 5.1 writes it, the terminate script's results, and the journal's files under <root>/fs/.
"""

from __future__ import annotations

import base64
import json
import os
import uuid

from ansible_collections.gpuops.remediation.plugins.module_utils.journal import _writer
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.tools import _gpu_memory_counters, _cim_processes, _wsl_cli
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.protect import _wsl_vm_identity
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.simulation._simulated_tools import taskkill_in_script
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.simulation._simulated_state import (
    MIB, SYSTEM_ACCOUNT, VM_AUTHORITY, WinSimError, _display_adapters, _kill_refusal, _pnp_locations, _process, _restart_shell, host_file, is_critical,
    process_memory, shell_facts,
)


def _terminate_script(state, parameters, caller):
    """The terminate script: each pid opened (Win32 error 87 when none has it, 5 when Windows refuses it to the caller),
    its creation time compared, then ended; Add-Type refused under Constrained Language Mode (the scenario's
    constrained_language)."""
    if state.get("constrained_language"):
        return {"unavailable": "Cannot add type. Definition of new types is not supported in this language mode.", "results": "[]"}
    results = []
    for pid, created in zip(parameters.get("ProcessIds") or [], parameters.get("CreationTimesMs") or []):
        process = _process(state, int(pid))
        if process is None:
            results.append({"ProcessId": int(pid), "Outcome": "not_opened", "Code": 87})
        elif process["creation_time_ms"] != int(created):
            results.append({"ProcessId": int(pid), "Outcome": "pid_reused", "Code": process["creation_time_ms"]})
        elif is_critical(process):
            # IsProcessCritical on the handle: TerminateProcess itself would end it (and stop the host)
            results.append({"ProcessId": int(pid), "Outcome": "critical", "Code": 0})
        elif _kill_refusal(state, process, caller):
            results.append({"ProcessId": int(pid), "Outcome": "not_opened", "Code": 5})
        else:
            state["processes"].remove(process)
            _restart_shell(state, process)
            results.append({"ProcessId": int(pid), "Outcome": "ended", "Code": 0})
    return {"results": _ps_json(results)}


def _ps_json(items):
    # 5.1 escapes the slashes of its date form: "\/Date(1790077571033)\/", and writes an empty pipeline
    # collected with @(...) as [null].
    if not items:
        return "[\r\n    null\r\n]"
    return json.dumps(items, indent=4).replace('"/Date(', '"\\/Date(').replace(')/"', ')\\/"')


def _store_wsl(state, path):
    return bool(state["store_wsl"]) and path == _wsl_cli.STORE_WSL_PATH


def _snapshot_script(state, parameters, _caller):
    memory_rows = []
    for process in state["processes"]:
        for luid, usage in sorted(process_memory(state, process).items()):
            high, low = luid.split("_")
            memory_rows.append({"Name": "pid_%d_luid_%s_%s_phys_0" % (process["pid"], high, low),
                                "DedicatedUsage": usage["dedicated_bytes"], "SharedUsage": usage["shared_bytes"],
                                "LocalUsage": usage["dedicated_bytes"], "NonLocalUsage": usage["shared_bytes"],
                                "TotalCommitted": usage["dedicated_bytes"] + usage["shared_bytes"]})
    for process in state["processes"]:
        if process.get("counter_mib") is not None and memory_rows:
            # what its per-process counter says (not what it holds): -1 is the sample of an exited process
            for row in memory_rows:
                if row["Name"].startswith("pid_%d_" % process["pid"]):
                    row["DedicatedUsage"] = -1 if process["counter_mib"] < 0 else process["counter_mib"] * MIB
    # Windows keeps a GPU Adapter Memory instance for every WDDM (and MCDM) adapter, at 0 when nothing holds it; a TCC
    # GPU is no WDDM adapter and has none.
    adapter_rows = dict((gpu["luid"], 0) for gpu in state["gpus"] if gpu["driver_model"] != "TCC")
    for process in state["processes"]:
        for luid, usage in process_memory(state, process).items():
            adapter_rows[luid] = adapter_rows.get(luid, 0) + usage["dedicated_bytes"]
    adapter_memory = [{"Name": "luid_%s_%s_phys_0" % tuple(luid.split("_")), "DedicatedUsage": value, "SharedUsage": 0}
                      for luid, value in sorted(adapter_rows.items())]
    constrained = bool(state.get("constrained_language"))
    adapters = [_registry_adapter(adapter, constrained) for adapter in sorted(_display_adapters(state), key=lambda a: a["registry_key"])]
    answer = {"process_memory": {"source": "cim", "json": _ps_json(memory_rows), "error": None}, "processes": _processes_json(state),
              "adapter_memory": {"source": "cim", "json": _ps_json(adapter_memory), "error": None},
              "adapters": _ps_json(adapters), "store_wsl": _store_wsl(state, parameters.get("WslPath")),
              "pnp_locations": _ps_json(_pnp_locations(state)), "pnp_error": None,
              "d3dkmt_error": "Cannot add type. Definition of new types is not supported in this language mode." if constrained else None}
    answer.update(_hcs(state))
    answer.update(shell_facts(state))
    if not state.get("adapter_memory_counters", True):
        # What the script's catch records on a host without the class (the CIM error's text; the plugins read only
        # that no source answered).
        answer["adapter_memory"] = {"source": None, "json": "", "error": "Invalid class \"Win32_PerfFormattedData_GPUPerformanceCounters_GPUAdapterMemory\""}
    if not state.get("pnp_properties", True):
        # What a host without the PnpDevice module answers (its message, English here; the plugins read only that it failed).
        answer.update(pnp_locations=None, pnp_error="The term 'Get-PnpDevice' is not recognized as the name of a cmdlet, "
                                                    "function, script file, or operable program.")
    return answer


def _registry_adapter(adapter, constrained=False):
    """One DirectX key's values as the snapshot script selects them (AdapterLuid: the QWORD as text) and the adapter's
    PCI location as D3DKMTQueryAdapterInfo(KMTQAITYPE_ADAPTERADDRESS) gives it (bus, device, function; no domain)."""
    dummy, bus, rest = adapter["pci_bus_id"].split(":")
    device, function = rest.split(".")
    return {"Key": adapter["registry_key"], "Description": adapter["name"], "AdapterLuid": str(_gpu_memory_counters.luid_value(adapter["luid"])),
            "VendorId": adapter["vendor_id"], "DeviceId": int(adapter["instance_id"].split("DEV_")[1][:4], 16),
            "SubSysId": _id_after(adapter["instance_id"], "SUBSYS_", 8), "RevisionId": _id_after(adapter["instance_id"], "REV_", 2),
            "BusNumber": None if constrained else int(bus, 16), "DeviceNumber": None if constrained else int(device, 16),
            "FunctionNumber": None if constrained else int(function, 16)}


def _id_after(instance_id, marker, width):
    at = instance_id.upper().find(marker)
    return int(instance_id[at + len(marker):at + len(marker) + width], 16) if at >= 0 else None


def _processes_json(state):
    return _ps_json([{"ProcessId": p["pid"], "ParentProcessId": p["ppid"], "Name": p["name"], "ExecutablePath": p["image_path"],
                      "CreationDate": "/Date(%d)/" % p["creation_time_ms"], "SessionId": p["session_id"],
                      "User": None if p.get("owner_hidden") else p["user"], "OwnerSid": _owner_sid(p), "VmId": p.get("vm_id_arg"),
                      "Services": ([p["service"]] if p.get("service") else []) if state.get("services_readable", True) else None}
                     for p in state["processes"]])


def _owner_sid(process):
    """Win32_Process.GetOwnerSid of a VM memory process (the script asks it of those only): its VM's account SID."""
    base = _cim_processes.base_name(process["name"])
    if base not in _cim_processes.VM_MEMORY_NAMES and base not in _cim_processes.PROTECTED_NAMES:
        return None
    vm_id = _wsl_vm_identity.vm_id_from_account(process.get("user"))
    if vm_id:
        return _wsl_vm_identity.sid_of_vm_id(vm_id)
    user = process.get("user") or ""
    if user.upper() == SYSTEM_ACCOUNT.upper() and not process.get("owner_hidden"):
        return _cim_processes.SYSTEM_SID
    if user and not process.get("owner_hidden") and not user.upper().startswith(VM_AUTHORITY):
        # a user's own program named vmmem: GetOwnerSid gives that user's SID
        return "S-1-5-21-1004336348-1177238915-682003330-%d" % (1000 + sum(user.lower().encode("utf-8")) % 9000)
    return None


def _hcs(state):
    """HcsEnumerateComputeSystems as the scripts return it: each running VM's Id and Owner (WSL for the WSL VMs, VMMS
    for Hyper-V's), or the Add-Type refusal under Constrained Language Mode."""
    if state.get("constrained_language"):
        return {"compute_systems": None, "hcs_error": "Cannot add type. Definition of new types is not supported in this language mode."}
    systems = []
    for process in state["processes"]:
        vm_id = process.get("vm_id") or (_wsl_vm_identity.vm_id_from_account(process.get("user")) if process.get("hyperv_vm") else None)
        if vm_id:
            systems.append({"Id": vm_id.upper(), "SystemType": "VirtualMachine", "Owner": "WSL" if process.get("wsl_vm_of") else "VMMS",
                            "RuntimeId": str(uuid.uuid5(uuid.NAMESPACE_OID, vm_id)), "State": "Running"})
    return {"compute_systems": json.dumps(systems), "hcs_error": None}


def _processes_script(state, _parameters, _caller):
    # $PID: the scenario's process marked runs_ansible (the module's own), where one is
    own = next((p["pid"] for p in state["processes"] if p.get("runs_ansible")), None)
    return dict(shell_facts(state), processes=_processes_json(state), own_pid=own)


def _wsl_vms_script(state, _parameters, _caller):
    return dict(_hcs(state), processes=_processes_json(state), **shell_facts(state))


def _wsl_path_script(state, parameters, _caller):
    return {"exists": _store_wsl(state, parameters.get("Path"))}


def _journal_append_script(root, parameters):
    line = parameters.get("Line")
    if not isinstance(line, str) or "\n" in line or "\r" in line:
        raise WinSimError("a journal line holds no newline: %r" % (line,))
    path = host_file(root, parameters.get("Path"))
    _refuse_links(root, path)
    folder = os.path.dirname(path)
    if not os.path.isdir(folder):
        os.makedirs(folder)
        _made_folders(root, add=folder)
    _refuse_planted(root, path)
    _writer.append_line(path, json.loads(line))
    return {"written": len(line.encode("utf-8")) + 1}


# The folders the journal script made (with its own DACL: SYSTEM and Administrators only), kept beside the host's files.
_MADE_FOLDERS = "journal-folders.json"
# What any other folder's DACL holds, as on a host: ProgramData's (and a drive root's) entry that lets BUILTIN\Users
# create files and folders, inherited by a folder an administrator makes there.
USERS_SID = "S-1-5-32-545"
_USERS_CREATE = 0x6  # CreateFiles | CreateDirectories (AppendData)


def _made_folders(root, add=None):
    path = os.path.join(root, _MADE_FOLDERS)
    made = []
    if os.path.exists(path):
        with open(path) as handle:
            made = json.load(handle)
    if add is not None and add not in made:
        made.append(add)
        with open(path, "w") as handle:
            json.dump(made, handle)
    return made


def _refuse_links(root, path):
    """A reparse point (here a symbolic link, dangling or not: islink reads the link itself) in any component of the
    path under the host's drives (the script's message)."""
    top = os.path.join(root, "fs")
    at = path
    while at.startswith(top + os.sep):
        if os.path.islink(at):
            raise WinSimError("%s is a reparse point (a junction or a link): the journal is never written through one" % at)
        at = os.path.dirname(at)


def _journal_check_script(root, parameters):
    """journal_check: what journal_append would refuse, nothing written."""
    path = host_file(root, parameters.get("Path"))
    _refuse_links(root, path)
    _refuse_planted(root, path, existing_only=True)
    return {"ok": True}


def _refuse_planted(root, path, existing_only=False):
    """What the journal_append script refuses after the folder exists: a link (again), a folder it did not make (whose
    DACL lets Users create in it, inherited from ProgramData or the drive), a journal file with more than one hard link
    (the script's messages). existing_only: a folder not made yet is no refusal (journal_check)."""
    _refuse_links(root, path)
    folder = os.path.dirname(path)
    if folder not in _made_folders(root) and not (existing_only and not os.path.lexists(folder)):
        raise WinSimError("%s lets %s write or create in it (rights 0x%X, inherited): only SYSTEM and Administrators may, refused "
                          "(remove it so that it is made with its own DACL, or choose another journal_path)" % (folder, USERS_SID, _USERS_CREATE))
    if os.path.isfile(path) and os.stat(path).st_nlink > 1:
        raise WinSimError("%s has more than one hard link (another name for the same file): refused (remove the other names, "
                          "or choose another journal_path)" % path)


def _journal_read_script(root, parameters):
    path = host_file(root, parameters.get("Path"))
    if not os.path.isfile(path):
        return {"exists": False, "cut": False, "base64": ""}
    tail = int(parameters.get("TailBytes"))
    with open(path, "rb") as handle:
        cut = os.fstat(handle.fileno()).st_size > tail
        if cut:
            handle.seek(-tail, os.SEEK_END)
        data = handle.read()
    return {"exists": True, "cut": cut, "base64": base64.b64encode(data).decode("ascii")}


_FILE_SCRIPTS = {"journal_append": _journal_append_script, "journal_check": _journal_check_script, "journal_read": _journal_read_script}


def _terminate_held_script(state, parameters, caller):
    """The terminate_held script (no Add-Type): each pid held by Get-Process's handle, its creation time compared, then
    `taskkill /F /PID` alone (never /T): the process's children stay, as they are not members. The handle keeps the pid
    from passing to another process, so the taskkill that runs ends the compared process."""
    results = []
    for pid, created in zip(parameters.get("ProcessIds") or [], parameters.get("CreationTimesMs") or []):
        process = _process(state, int(pid))
        if process is None:
            results.append({"ProcessId": int(pid), "Outcome": "not_opened", "Code": 87, "Message": None})
        elif process["creation_time_ms"] != int(created):
            results.append({"ProcessId": int(pid), "Outcome": "pid_reused", "Code": process["creation_time_ms"], "Message": None})
        else:
            answer = taskkill_in_script(state, ["/F", "/PID", str(int(pid))], caller)
            said = (answer.stdout + answer.stderr).decode("latin-1").strip()
            results.append({"ProcessId": int(pid), "Outcome": "ended" if answer.rc == 0 else "not_terminated", "Code": answer.rc,
                            "Message": said or None})
    return {"results": _ps_json(results)}


_ACTING_SCRIPTS = {"terminate": _terminate_script, "terminate_held": _terminate_held_script}


def _code_page_script(state, _parameters, _caller):
    return {"oem": str(state.get("oem_code_page", 437)), "ansi": "1252"}


_WTS_STATE = {"active": 0, "disc": 4}


def _sessions_script(state, _parameters, _caller):
    """WTSEnumerateSessions: the services' session 0 and the RDP listener (no user) and each user's session; Add-Type
    refused under Constrained Language Mode. The connection runs in session 0 (a network logon)."""
    if state.get("constrained_language"):
        return {"unavailable": "Cannot add type. Definition of new types is not supported in this language mode.", "sessions": "[]"}
    rows = [{"SessionId": 0, "State": 4, "WinStationName": "Services", "UserName": "", "DomainName": ""}]
    rows.extend({"SessionId": s["id"], "State": _WTS_STATE.get(str(s["state"]).lower(), 0), "WinStationName": s["session_name"] or "",
                 "UserName": s["user"], "DomainName": state["hostname"]} for s in state["sessions"])
    rows.append({"SessionId": 65536, "State": 6, "WinStationName": "RDP-Tcp", "UserName": "", "DomainName": ""})
    return {"unavailable": None, "sessions": _ps_json(rows), "own_session": 0}


_SCRIPTS = {"snapshot": _snapshot_script, "wsl_path": _wsl_path_script, "processes": _processes_script, "wsl_vms": _wsl_vms_script,
            "code_page": _code_page_script, "sessions": _sessions_script}
