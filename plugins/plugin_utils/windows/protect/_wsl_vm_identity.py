# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which virtual machine a VM memory process (vmmem, vmmemWSL) is: the WSL VM or another (a Hyper-V VM, a sandbox),
and whose WSL VM it is. The one answer; the snapshot asks it, the wsl rung and wsl_shutdown read what it said.

Facts, not the name, wherever a fact answers:
- The VM's id: the owner SID of its memory process, S-1-5-83-1-a-b-c-d (the account NT VIRTUAL MACHINE\\<id>, the
  VM's GUID as four 32-bit sub-authorities); the account's name only where no SID came back and it ends in a GUID.
- Which VMs are WSL's: the Host Compute Service's compute systems (HcsEnumerateComputeSystems of vmcompute.dll, which
  the snapshot script asks): a compute system whose Owner is "WSL".
- Whose WSL VM it is: the Windows user of a WSL process (wslrelay.exe, wslhost.exe) whose command line names that VM
  (--vm-id <guid>), as Win32_Process gives it.
Where HCS could not be asked (Add-Type refused by Constrained Language Mode or AppLocker, no elevation, no
vmcompute.dll): vmmemWSL, the name Windows gives only the WSL VM's memory process, is the WSL VM; a plain vmmem is not
known to be WSL's and is never taken for it (no rung acts on it).
"""

from __future__ import annotations

import re
import uuid

from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.node import _convertto_json
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.tools._cim_processes import base_name
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.protect._who_may_end import bare_user

WSL_OWNER = "WSL"
WSL_VM_MEMORY_NAME = "vmmemwsl"
_VM_SID_RE = re.compile(r"^S-1-5-83-1-(\d+)-(\d+)-(\d+)-(\d+)$", re.IGNORECASE)
_GUID_RE = re.compile(r"\{?([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})\}?$")


def vm_id_from_sid(sid):
    """S-1-5-83-1-a-b-c-d (a virtual machine's account) -> its VM id (lower-case GUID), else None."""
    match = _VM_SID_RE.match((sid or "").strip()) if isinstance(sid, str) else None
    if not match:
        return None
    parts = [int(part) for part in match.groups()]
    if any(part > 0xFFFFFFFF for part in parts):
        return None
    return str(uuid.UUID(bytes_le=b"".join(part.to_bytes(4, "little") for part in parts)))


def sid_of_vm_id(vm_id):
    """The account SID of the VM `vm_id` (what its memory process runs as): the inverse of vm_id_from_sid."""
    raw = uuid.UUID(vm_id).bytes_le
    return "S-1-5-83-1-" + "-".join(str(int.from_bytes(raw[at:at + 4], "little")) for at in range(0, 16, 4))


def vm_id_from_account(user):
    """NT VIRTUAL MACHINE\\<guid> (the domain part is localized: only the GUID after it is read) -> the GUID, else None."""
    if not isinstance(user, str) or "\\" not in user:
        return None
    match = _GUID_RE.match(user.rsplit("\\", 1)[1].strip())
    return match.group(1).lower() if match else None


def guid(text):
    """A GUID as a command line writes it ({...} or bare, any case) -> lower case without braces, else None."""
    match = _GUID_RE.match((text or "").strip()) if isinstance(text, str) else None
    return match.group(1).lower() if match else None


def parse_compute_systems(text):
    """HcsEnumerateComputeSystems' JSON ([{"Id", "Owner", "SystemType", "State", ...}]) -> {vm id: owner}; ValueError
    when it is not that."""
    systems = {}
    for item in _convertto_json.objects(text):
        vm_id = guid(item.get("Id"))
        if vm_id is None:
            raise ValueError("a compute system without a GUID Id: %r" % (item,))
        systems[vm_id] = item.get("Owner")
    return systems


def identify(processes, compute_systems):
    """Annotate every VM memory process (role "vm") of `processes` with "vm_id", "vm_kind" ("wsl", "other" or None:
    not known), "vm_kind_source" ("hcs", "name" or None) and "wsl_owner" (the Windows user whose WSL VM it is, or None).
    `compute_systems`: parse_compute_systems' answer, or None when HCS could not be asked. -> the VM processes."""
    owners = {}
    for process in processes:
        named = guid(process.get("vm_id_arg"))
        if named and process.get("user"):
            owners.setdefault(named, set()).add(process["user"])
    vms = [process for process in processes if process.get("role") == "vm"]
    for process in vms:
        vm_id = vm_id_from_sid(process.get("owner_sid")) or vm_id_from_account(process.get("user"))
        kind, source = None, None
        if compute_systems is not None and vm_id is not None:
            owner = compute_systems.get(vm_id)
            kind, source = ("wsl" if (owner or "").upper() == WSL_OWNER else "other"), "hcs"
        elif base_name(process.get("name")) == WSL_VM_MEMORY_NAME:
            kind, source = "wsl", "name"
        users = sorted(owners.get(vm_id) or ()) if vm_id else []
        process.update(vm_id=vm_id, vm_kind=kind, vm_kind_source=source,
                       wsl_owner=users[0] if kind == "wsl" and len(users) == 1 else None)
    return vms


def owned_by(vm, user):
    """Whether the WSL VM `vm` (identify's) is `user`'s: True, False, or None when its owner or the user is not known."""
    if not vm.get("wsl_owner") or not user:
        return None
    return bare_user(vm["wsl_owner"]) == bare_user(user)
