# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""pnputil: the display adapters `/enum-devices /class Display` lists, and restarting one of them.

The adapters, their state and their PCI location come from Get-PnpDevice (Win32_PnPEntity: ConfigManagerErrorCode,
a number) where it answers (devices_from_cim); pnputil's listing is read only where it does not. Its words
("Started", "Gestartet", "Disabled") decide nothing: they are kept for the report.

pnputil's labels are localized ("Instance ID:" is not what a German host prints), so a device block is read by
the order pnputil writes its first six fields in (Instance ID, Device Description, Class Name, Class GUID,
Manufacturer Name, Status), checked by the Class GUID's shape, and after them by the shapes of the values
(a driver is "*.inf", a problem code "43 (0x2B) ..."). Restarting never uses `/class Display`: that restarts
every adapter of the host, the one driving the console included.

Where each adapter sits on the PCI bus comes from PowerShell, not from pnputil's text: the snapshot script's
`Get-PnpDeviceProperty -InstanceId <id> -KeyName DEVPKEY_Device_BusNumber, DEVPKEY_Device_Address` objects
(parse_pnp_locations), numbers that no language changes.
"""

from __future__ import annotations

import re

from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.node import _convertto_json

DISPLAY_CLASS_GUID = "{4d36e968-e325-11ce-bfc1-08002be10318}"
NVIDIA_VENDOR_ID = "10DE"
RC_RESTARTED = 0
RC_REBOOT_REQUIRED = 3010  # ERROR_SUCCESS_REBOOT_REQUIRED

_POSITIONAL = ("instance_id", "description", "class_name", "class_guid", "manufacturer", "status")
_FIELD_RE = re.compile(r"^(?P<label>[^:]+):\s+(?P<value>.*)$")
_GUID_RE = re.compile(r"^\{[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\}$", re.IGNORECASE)
_INF_RE = re.compile(r"^[\w.-]+\.inf$", re.IGNORECASE)
_PROBLEM_RE = re.compile(r"^(?P<code>\d+) \(0x[0-9A-F]+\)", re.IGNORECASE)
_PCI_IDS_RE = re.compile(r"^PCI\\VEN_(?P<vendor>[0-9A-F]{4})&DEV_(?P<device>[0-9A-F]{4})", re.IGNORECASE)
# An enumerator, then backslash-separated parts; no quote, control character or leading "/" (an option).
_INSTANCE_ID_RE = re.compile(r'^[A-Za-z0-9_]+(\\[^\\"\x00-\x1f]+)+$')
# Get-PnpDeviceProperty's objects are Win32_PnPDeviceProperty ones: KeyName, Type (the DEVPROPTYPE, a UInt32: 6 Int32,
# 7 UInt32, 0 Empty for a key the device lacks) and Data (https://docs.microsoft.com/en-us/windows/win32/cimwin32prov/
# win32-pnpdeviceproperty; printed as a table "InstanceId KeyName Type Data ... UInt32 164" in
# https://coderapp.vercel.app/answer/78121700). ConvertTo-Json writes Type as its number; its name is read too.
BUS_NUMBER_KEY = "DEVPKEY_Device_BusNumber"
ADDRESS_KEY = "DEVPKEY_Device_Address"
_INTEGER_TYPES = frozenset((6, 7, "int32", "uint32"))
_PCI_ENUMERATOR = "pci\\"


def parse_enum_devices(text):
    """`pnputil /enum-devices [/class Display]` -> (devices, unrecognised blocks).

    device: {"instance_id", "description", "class_name", "class_guid", "manufacturer", "status" (the localized word,
    for the report only: it decides nothing), "driver_name", "extension_drivers", "problem_code" (the number of a
    "43 (0x2B) ..." line, else None), "vendor_id", "device_id", "is_nvidia", "is_display", "state_source": "pnputil"}.
    Read only where Get-PnpDevice does not answer (devices_from_cim is the state then).
    """
    devices, unrecognised = [], []
    for block in _blocks(text):
        fields = [_FIELD_RE.match(line) for line in block]
        if not any(fields):
            continue  # the banner, a prompt line
        device = _device(block, fields)
        if device is None:
            unrecognised.append("\n".join(block))
        else:
            devices.append(device)
    return devices, unrecognised


def parse_pnp_locations(text):
    """The snapshot script's `pnp_locations` JSON -> {instance id, lower case: {"instance_id" (as Windows spells it),
    "present": bool|None, "pci_location": [bus, device, function]|None, "pci_domain": int|None, "description",
    "manufacturer", "status" (Win32_PnPEntity.Status: "OK", "Error", "Degraded", "Unknown"), "problem_code"
    (ConfigManagerErrorCode: 0 working, 22 disabled, 43 stopped by its driver ...; None when not given)}}.

    Each item: {"InstanceId", "FriendlyName", "Manufacturer", "Present", "Status", "ConfigManagerErrorCode" (Get-PnpDevice's),
    "Properties": [Get-PnpDeviceProperty's objects]}. A location is known only for a PCI device whose two keys both
    came back as whole numbers in range: the bus from BusNumber, the device and function from Address, which for PCI is
    (device << 16) | function. Windows gives a device on a PCI segment other than 0 the bus number (segment << 8) | bus
    (as DPDK's Windows bus driver reads it): the domain is that segment. A device that returned no property (a virtual
    display driver's) or an Empty one has none. ValueError when the text is not ConvertTo-Json objects."""
    locations = {}
    for item in _convertto_json.objects(text):
        instance_id = item.get("InstanceId")
        if not isinstance(instance_id, str) or not instance_id:
            continue
        present = item.get("Present")
        location = _pci_location(instance_id, item.get("Properties"))
        code = _convertto_json.integer(item.get("ConfigManagerErrorCode"))
        locations[instance_id.lower()] = {
            "instance_id": instance_id, "present": present if isinstance(present, bool) else None,
            "pci_location": location[1:] if location else None, "pci_domain": location[0] if location else None,
            "description": _text(item.get("FriendlyName")), "manufacturer": _text(item.get("Manufacturer")),
            "status": _text(item.get("Status")), "problem_code": code if code is not None and code >= 0 else None}
    return locations


def devices_from_cim(locations):
    """The display adapters as Get-PnpDevice gave them (parse_pnp_locations), in parse_enum_devices' form with
    "state_source": "cim": the state is ConfigManagerErrorCode, a number ("problem_code": None when 0, working; the
    device's problem code otherwise; "state_known" False when CIM gave none), never a word."""
    devices = []
    for known in locations.values():
        ids = _PCI_IDS_RE.match(known["instance_id"])
        code = known.get("problem_code")
        devices.append({"instance_id": known["instance_id"], "description": known.get("description"), "class_name": "Display",
                        "class_guid": DISPLAY_CLASS_GUID, "manufacturer": known.get("manufacturer"), "status": known.get("status"),
                        "driver_name": None, "extension_drivers": [], "problem_code": code or None, "state_known": code is not None,
                        "vendor_id": ids.group("vendor").upper() if ids else None, "device_id": ids.group("device").upper() if ids else None,
                        "is_display": True, "is_nvidia": bool(ids) and ids.group("vendor").upper() == NVIDIA_VENDOR_ID, "state_source": "cim"})
    return devices


def _text(value):
    return value.strip() if isinstance(value, str) and value.strip() else None


def _pci_location(instance_id, properties):
    if not instance_id.lower().startswith(_PCI_ENUMERATOR) or not isinstance(properties, (list, dict)):
        return None
    values = {}
    for prop in properties if isinstance(properties, list) else [properties]:
        if isinstance(prop, dict) and _is_integer_type(prop.get("Type")):
            values[prop.get("KeyName")] = _convertto_json.integer(prop.get("Data"))
    bus, address = values.get(BUS_NUMBER_KEY), values.get(ADDRESS_KEY)
    if bus is None or address is None or not 0 <= bus <= 0xFFFFFF or not 0 <= address <= 0xFFFFFFFF:
        return None
    device, function = address >> 16, address & 0xFFFF
    return [bus >> 8, bus & 0xFF, device, function] if device <= 31 and function <= 7 else None


def _is_integer_type(kind):
    if isinstance(kind, str):
        return kind.strip().lower() in _INTEGER_TYPES
    return isinstance(kind, int) and not isinstance(kind, bool) and kind in _INTEGER_TYPES


def restart_device_argv(instance_id):
    """argv restarting one device by its instance id (Windows 10 2004 and later)."""
    if not isinstance(instance_id, str) or not _INSTANCE_ID_RE.fullmatch(instance_id):
        raise ValueError("not a device instance id: %r" % (instance_id,))
    return ["pnputil", "/restart-device", instance_id]


def restart_outcome(rc, text):
    """What `/restart-device` did: {"restarted": bool, "reboot_required": bool, "outcome": "restarted"|
    "reboot_required"|"unsupported"|"failed", "message": str|None}."""
    message = text.strip() or None
    if "PNPUTIL [" in text:
        # An older pnputil given a command it lacks prints its usage instead of acting.
        return {"restarted": False, "reboot_required": False, "outcome": "unsupported",
                "message": "pnputil printed its usage: this Windows build has no /restart-device"}
    if rc == RC_RESTARTED:
        return {"restarted": True, "reboot_required": False, "outcome": "restarted", "message": None}
    if rc == RC_REBOOT_REQUIRED:
        return {"restarted": True, "reboot_required": True, "outcome": "reboot_required", "message": message}
    return {"restarted": False, "reboot_required": False, "outcome": "failed",
            "message": "pnputil exited %s: %s" % (rc, message)}


def _blocks(text):
    block = []
    for line in text.splitlines():
        if line.strip():
            block.append(line.strip())
        elif block:
            yield block
            block = []
    if block:
        yield block


def _device(block, fields):
    first = next(at for at, field in enumerate(fields) if field)
    labelled = [(field.group("value").strip() if field else None, line)
                for field, line in zip(fields[first:], block[first:])]
    if len(labelled) < len(_POSITIONAL) or any(value is None for value, _line in labelled[:len(_POSITIONAL)]):
        return None
    device = dict(zip(_POSITIONAL, (value for value, _line in labelled)))
    if not _GUID_RE.match(device["class_guid"]):
        return None
    device.update(_later_fields(labelled[len(_POSITIONAL):]))
    ids = _PCI_IDS_RE.match(device["instance_id"])
    device.update(
        state_source="pnputil",
        vendor_id=ids.group("vendor").upper() if ids else None,
        device_id=ids.group("device").upper() if ids else None,
        is_display=device["class_guid"].lower() == DISPLAY_CLASS_GUID)
    device["is_nvidia"] = device["vendor_id"] == NVIDIA_VENDOR_ID
    device["state_known"] = False  # pnputil's status word is localized: only its problem code line says anything
    return device


def _later_fields(labelled):
    later = {"driver_name": None, "extension_drivers": [], "problem_code": None}
    for value, line in labelled:
        value = line if value is None else value  # a continuation line ("oem3.inf" under Extension Driver Names)
        problem = _PROBLEM_RE.match(value)
        if problem and later["problem_code"] is None:
            later["problem_code"] = int(problem.group("code"))
        elif _INF_RE.match(value):
            if later["driver_name"] is None:
                later["driver_name"] = value
            else:
                later["extension_drivers"].append(value)
    return later
