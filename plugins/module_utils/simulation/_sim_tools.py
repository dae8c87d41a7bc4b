# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The simulated node's commands: nvidia-smi, modprobe, lsmod, systemctl (and dcgmi, from _sim_dcgmi).

gpu_sim copies this file into <root>/lib and writes <root>/bin/<tool> scripts that call
main(tool, argv, root). Each tool reads and changes <root>/state.json (_sim_state), keeps the kernel's rules
(_sim_rules), starts and stops services (_sim_processes), and prints what the real tool prints (the captures in
tests/unit/plugins/fixtures are the reference), with the real exit codes.
"""

from __future__ import annotations

import importlib
import os
import sys

try:
    from ansible_collections.gpuops.remediation.plugins.module_utils.simulation import _sim_state as node
except ImportError:  # running from <root>/lib as plain modules
    import _sim_state as node  # type: ignore[no-redef] # pylint: disable=import-error


class _OnFirstUse:
    """A module imported when one of its names is first read: each tool stands in for a C binary that starts in a few
    milliseconds, so a run imports only what its command reads (systemctl show: the state file alone). `package`: the
    collection's package of a sibling, which on a node is a plain module of <root>/lib; None for the standard library.
    (gpu_sim imports every sibling by name, so that its payload carries them.)"""

    def __init__(self, name, package=None):
        self._name = name
        self._package = package
        self._module = None

    def __getattr__(self, attribute):
        if self._module is None:
            try:
                self._module = importlib.import_module(self._package + "." + self._name if self._package else self._name)
            except ImportError:
                if self._package is None:
                    raise
                self._module = importlib.import_module(self._name)  # running from <root>/lib as plain modules
        return getattr(self._module, attribute)


_PROBES = "ansible_collections.gpuops.remediation.plugins.module_utils.probes"
_SIMULATION = "ansible_collections.gpuops.remediation.plugins.module_utils.simulation"
pci = _OnFirstUse("_pci", _PROBES)
dcgmi_tool = _OnFirstUse("_sim_dcgmi", _SIMULATION)
sim_mig = _OnFirstUse("_sim_mig", _SIMULATION)
mig_write = _OnFirstUse("_sim_mig_write", _SIMULATION)
processes = _OnFirstUse("_sim_processes", _SIMULATION)
rules = _OnFirstUse("_sim_rules", _SIMULATION)
datetime = _OnFirstUse("datetime")
shutil = _OnFirstUse("shutil")
time = _OnFirstUse("time")

NVSMI_DRIVER_FAILED = ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
                       "Make sure that the latest NVIDIA driver is installed and running.\n")
NVSMI_BAD_ARGS = "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n"
RC_OK, RC_INVALID_ARG, RC_NOT_FOUND, RC_DRIVER_NOT_LOADED, RC_GPU_LOST, RC_OTHER = 0, 2, 6, 9, 15, 255
RESET_IN_USE_TAIL = ("{count} {devices} currently being used by one or more other processes (e.g., Fabric Manager, CUDA "
                     "application, graphics application such as an X server, or a monitoring application such as another "
                     "instance of nvidia-smi). Please first kill all processes using {this} and all compute applications "
                     "running in the system.\n")
RECOVERY_TEXT = {"none": "None", "reset": "Reset", "reboot": "Reboot", "drain_p2p": "Drain P2P",
                 "drain_and_reset": "Drain and Reset"}


def escape(text):
    """XML character data, as xml.sax.saxutils.escape gives it (that module drags in urllib, http and ssl:
    60 ms of imports at every start of a simulated tool)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def quoteattr(text):
    return '"%s"' % escape(text).replace('"', "&quot;").replace("\n", "&#10;").replace("\r", "&#13;").replace("\t", "&#9;")


class Output:
    """What a tool run prints and returns; main() writes it out."""

    def __init__(self):
        self.out = []
        self.err = []

    def say(self, text):
        self.out.append(text)

    def warn(self, text):
        self.err.append(text)


COMMAND_LOG = "commands.jsonl"
LOCALE_VARIABLES = ("LC_ALL", "LC_MESSAGES", "LANG")


def log_command(tool, argv, root):
    """<root>/commands.jsonl: what the node was asked to run, and in which locale (a rehearsal shows both)."""
    record = {"tool": tool, "argv": list(argv), "locale": dict((name, os.environ.get(name)) for name in LOCALE_VARIABLES)}
    with open(os.path.join(root, COMMAND_LOG), "a", encoding="utf-8") as handle:
        handle.write(node.json_text(record) + "\n")


def main(tool, argv, root, stdout=None, stderr=None):
    """Run one simulated tool; returns its exit code."""
    log_command(tool, argv, root)
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    handlers = {"nvidia-smi": nvidia_smi, "modprobe": modprobe, "lsmod": lsmod, "systemctl": systemctl, "dcgmi": _dcgmi,
                "loginctl": loginctl}
    if tool not in handlers:
        stderr.write("%s: not a simulated tool\n" % tool)
        return 127
    output = Output()
    try:
        rc = handlers[tool](list(argv), root, output)
    except node.SimError as exc:
        output.warn("%s: %s\n" % (tool, exc))
        rc = 1
    stdout.write("".join(output.out))
    stderr.write("".join(output.err))
    stdout.flush()
    return rc


def _dcgmi(argv, root, out):
    return dcgmi_tool.dcgmi(argv, root, out)


def _hang_forever():
    """A driver call that never comes back, like NVML stuck in D state."""
    while True:
        time.sleep(3600)


# ---------------------------------------------------------------- nvidia-smi

def _lost_line(gpu):
    domain, rest = gpu["pci_bus_id"].split(":", 1)
    return "Unable to determine the device handle for GPU%s:%s: Unknown Error\n" % (domain[-4:], rest)


def _parse_smi_args(argv):
    opts = {"ids": None, "mode": "table", "format": []}
    args = list(argv)
    while args:
        arg = args.pop(0)
        name, eq, value = arg.partition("=")
        if arg in ("-q", "--query"):
            opts["mode"] = "xml" if opts["mode"] == "xml" else "query"
        elif arg in ("-x", "--xml-format"):
            opts["mode"] = "xml"
        elif arg in ("-L", "--list-gpus"):
            opts["mode"] = "list"
        elif arg in ("-r", "--gpu-reset"):
            opts["mode"] = "reset"
        elif name in ("-i", "--id"):
            opts["ids"] = value if eq else (args.pop(0) if args else "")
        elif name in ("-pm", "--persistence-mode"):
            opts["mode"] = "pm"
            opts["pm"] = value if eq else (args.pop(0) if args else "")
        elif name == "--query-gpu":
            opts["mode"], opts["fields"] = "query-gpu", value
        elif name == "--query-compute-apps":
            opts["mode"], opts["fields"] = "query-compute-apps", value
        elif name == "--format":
            opts["format"] = [part.strip() for part in value.split(",")]
        else:
            return None
    return opts


def _select_gpus(state, ids):
    """GPUs named by -i (indexes, bus ids or UUIDs, comma separated); all when ids is None."""
    if ids is None:
        return list(state["gpus"])
    chosen = []
    for item in ids.split(","):
        item = item.strip()
        match = None
        for gpu in state["gpus"]:
            if item == str(gpu["index"]) or item == gpu["uuid"] or _same_bus(item, gpu["pci_bus_id"]):
                match = gpu
        if match is None:
            return None
        chosen.append(match)
    return chosen


def _same_bus(text, bus):
    return pci.normalize_bus_id(text) == bus


def nvidia_smi(argv, root, out):
    state = node.load_state(root)
    if state.get("nvml_hang"):
        _hang_forever()
    if not node.driver_loaded(state):
        out.say(NVSMI_DRIVER_FAILED)
        return RC_DRIVER_NOT_LOADED
    if argv[:1] == ["mig"]:
        return _nvidia_smi_mig(argv[1:], root, out)
    opts = _parse_smi_args(argv)
    if opts is None:
        out.say(NVSMI_BAD_ARGS)
        return RC_INVALID_ARG
    gpus = _select_gpus(state, opts["ids"])
    if gpus is None:
        out.say("No devices were found\n")
        return RC_NOT_FOUND
    if opts["mode"] == "reset":
        return _gpu_reset(root, [gpu["index"] for gpu in gpus], out)
    if opts["mode"] == "pm":
        return _persistence_mode(root, [gpu["index"] for gpu in gpus], opts.get("pm"), out)
    if opts["mode"] == "query":
        out.say("nvidia-smi -q without -x is not simulated; use -q -x\n")
        return RC_INVALID_ARG
    rc = RC_OK
    healthy = []
    for gpu in gpus:
        if gpu.get("lost"):
            out.warn(_lost_line(gpu))
            rc = RC_GPU_LOST
        else:
            healthy.append(gpu)
    renderers = {"xml": _render_xml, "list": _render_list, "query-gpu": _render_query_gpu,
                 "query-compute-apps": _render_compute_apps, "table": _render_table}
    render_rc = renderers[opts["mode"]](state, healthy, opts, out)
    return render_rc or rc


def _parse_mig_args(argv):
    """nvidia-smi mig's options simulated: -i <gpu>, -lgi, -lci, -cgi <profile[:start],...> [-C], -cci [<ids>],
    -dci, -dgi, -gi <ids>, -ci <ids>; None for anything else."""
    opts = {"ids": None, "verb": None, "profiles": [], "with_ci": False, "gi": None, "ci": None}
    args = list(argv)
    verbs = {"-lgi": "lgi", "--list-gpu-instances": "lgi", "-lci": "lci", "--list-compute-instances": "lci",
             "-dci": "dci", "--destroy-compute-instance": "dci", "-dgi": "dgi", "--destroy-gpu-instance": "dgi"}
    while args:
        arg = args.pop(0)
        if arg in ("-i", "--id") and args:
            opts["ids"] = args.pop(0)
        elif arg in verbs:
            opts["verb"] = verbs[arg]
        elif arg in ("-cgi", "--create-gpu-instance") and args:
            opts["verb"], opts["profiles"] = "cgi", [word.strip() for word in args.pop(0).split(",")]
        elif arg in ("-cci", "--create-compute-instance"):
            opts["verb"] = "cci"
            if args and not args[0].startswith("-"):
                opts["profiles"] = [word.strip() for word in args.pop(0).split(",")]
        elif arg in ("-gi", "--gpu-instance-id", "-ci", "--compute-instance-id") and args:
            words = args.pop(0).split(",")
            if not all(word.strip().isdigit() for word in words):
                return None
            opts["gi" if arg in ("-gi", "--gpu-instance-id") else "ci"] = [int(word) for word in words]
        elif arg in ("-C", "--default-compute-instance"):
            opts["with_ci"] = True
        else:
            return None
    return opts if opts["verb"] else None


def _nvidia_smi_mig(argv, root, out):
    opts = _parse_mig_args(argv)
    if opts is None:
        out.say(NVSMI_BAD_ARGS)
        return RC_INVALID_ARG
    if opts["verb"] in ("lgi", "lci"):
        mig_write.wait_while_held(node.load_state, root)
    gpus = _select_gpus(node.load_state(root), opts["ids"])
    if gpus is None:
        out.say("No devices were found\n")
        return RC_NOT_FOUND
    if opts["verb"] in ("lgi", "lci") and node.load_state(root).get(sim_mig.DENIED_KEY):
        what = "GPU instances" if opts["verb"] == "lgi" else "compute instances"
        out.say("Unable to list %s on GPU %2d: %s\nFailed to display %s: %s\n" % (
            what, gpus[0]["index"], sim_mig.NO_PERMISSION, what, sim_mig.NO_PERMISSION))
        return sim_mig.RC_NO_PERMISSION
    if opts["verb"] in ("lgi", "lci"):
        return _list_instances(opts["verb"], gpus, out)
    indexes = [gpu["index"] for gpu in gpus]
    lines = []
    changes = {"cgi": _create_instances, "cci": _mig_write_verb, "dci": _mig_write_verb, "dgi": _mig_write_verb}
    users = rules.device_users(root) if opts["verb"] in ("dci", "dgi") else {}
    node.update_state(root, lambda state: lines.extend(changes[opts["verb"]](state, indexes, opts, users)))
    node.update_state(root, lambda state: _publish_mig(root, state))
    out.say("".join(line + "\n" for line in lines))
    return RC_OTHER if lines and lines[-1].startswith("Failed") else RC_OK


def _mig_write_verb(state, indexes, opts, users):
    """-cci, -dci, -dgi on each GPU in turn, stopping at the first refusal as the real tool does."""
    lines = []
    for index in indexes:
        gpu = node.find_gpu(state, index)
        if opts["verb"] == "cci":
            done, failed = mig_write.create_compute_instances(gpu, opts["gi"], opts["profiles"])
        elif opts["verb"] == "dci":
            done, failed = mig_write.destroy_compute_instances(gpu, opts["gi"], opts["ci"], users)
        else:
            done, failed = mig_write.destroy_gpu_instances(gpu, opts["gi"], users)
        lines.extend(done)
        if failed:
            break
    return lines


def _list_instances(verb, gpus, out):
    """nvidia-smi mig -lgi / -lci: the table, or the real tool's Not Found (exit 6) when there is nothing to list."""
    render = sim_mig.render_lgi if verb == "lgi" else sim_mig.render_lci
    out.say("".join(line + "\n" for line in render(gpus)))
    return RC_OK if any(gpu.get("gpu_instances") for gpu in gpus) else RC_NOT_FOUND


def _publish_mig(root, state):
    """What the driver shows of the instances: the capabilities access files and the nvidia-caps nodes."""
    caps_dir = os.path.join(root, "proc", "driver", "nvidia", "capabilities")
    nodes_dir = node.dev_path(root, "nvidia-caps")
    for directory in (caps_dir, nodes_dir):
        if os.path.isdir(directory):
            shutil.rmtree(directory)
    for relative, text in sim_mig.capability_files(state["gpus"]).items():
        path = os.path.join(caps_dir, relative)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as handle:
            handle.write(text)
        os.makedirs(nodes_dir, exist_ok=True)
        minor = int(text.split()[1])
        with open(os.path.join(nodes_dir, "nvidia-cap%d" % minor), "wb") as handle:
            handle.write(b"\0" * node.DEVICE_SIZE)


def _create_instances(state, indexes, opts, users=None):  # pylint: disable=unused-argument
    """nvidia-smi mig -cgi on each GPU in turn, stopping at the first refusal as the real tool does."""
    lines = []
    for index in indexes:
        gpu = node.find_gpu(state, index)
        for word in opts["profiles"]:
            try:
                profile, start = mig_write.profile_and_start(gpu["name"], word)
                gi = sim_mig.create_gpu_instance(gpu, profile["id"], start)
            except sim_mig.MigError as exc:
                return lines + sim_mig.create_failure_lines(index, word, str(exc))
            lines.append("Successfully created GPU instance ID %2d on GPU %2d using profile MIG %s (ID %2d)"
                         % (gi["id"], index, profile["name"], profile["id"]))
            if opts["with_ci"]:
                ci = sim_mig.create_compute_instance(gpu, gi["id"])
                lines.append("Successfully created compute instance ID %2d on GPU %2d GPU instance ID %2d using profile MIG %s (ID %2d)"
                             % (ci["id"], index, gi["id"], profile["name"], ci["profile_id"]))
    return lines


def _render_list(state, gpus, opts, out):
    for gpu in gpus:
        out.say("GPU %d: %s (UUID: %s)\n" % (gpu["index"], gpu["name"], gpu["uuid"]))
        for device in sim_mig.devices(gpu):
            out.say("  %-15s Device %2d: (UUID: %s)\n" % ("MIG " + device["name"], device["index"], device["uuid"]))
    return RC_OK


def _processes(state, gpu, wanted_types):
    """Live holders of one GPU whose type is among wanted_types ('C' and/or 'G')."""
    rows = []
    for holder in node.live_holders(state, gpu["index"]):
        if set(holder.get("type", "C").split("+")) & set(wanted_types):
            rows.append(holder)
    return rows


def _now_text():
    return datetime.datetime.now().strftime("%Y/%m/%d %H:%M:%S.%f")[:-3]


def _mig_text(gpu, key):
    mig = gpu.get("mig_mode")
    if mig is None:
        return "[N/A]"
    return "Enabled" if mig.get(key) else "Disabled"


def _gpu_fields(state, gpu, mem):
    """--query-gpu field -> (value, unit or None)."""
    bus = gpu["pci_bus_id"]
    return {
        "timestamp": (_now_text(), None),
        "driver_version": (state["driver_version"], None),
        "count": (str(len(state["gpus"])), None),
        "name": (gpu["name"], None), "gpu_name": (gpu["name"], None),
        "serial": (node.gpu_serial(gpu), None), "gpu_serial": (node.gpu_serial(gpu), None),
        "uuid": (gpu["uuid"], None), "gpu_uuid": (gpu["uuid"], None),
        "pci.bus_id": (bus, None), "gpu_bus_id": (bus, None),
        "pci.domain": ("0x%s" % bus[4:8], None), "pci.bus": ("0x%s" % bus[9:11], None),
        "pci.device": ("0x%s" % bus[12:14], None), "pci.device_id": ("0x%s" % gpu["pci_device_id"], None),
        "index": (str(gpu["index"]), None),
        "persistence_mode": ("Enabled" if gpu["persistence_mode"] else "Disabled", None),
        "memory.total": (str(mem["total_mib"]), "MiB"), "memory.reserved": (str(mem["reserved_mib"]), "MiB"),
        "memory.used": (str(mem["used_mib"]), "MiB"), "memory.free": (str(mem["free_mib"]), "MiB"),
        "compute_mode": (gpu["compute_mode"], None),
        "mig.mode.current": (_mig_text(gpu, "current"), None), "mig.mode.pending": (_mig_text(gpu, "pending"), None),
        "gpu_recovery_action": (RECOVERY_TEXT.get(gpu["recovery_action"], "None"), None),
    }


def _csv(rows, fields, fmt, out):
    """Print rows of {field: (value, unit)} the way --format=csv[,noheader][,nounits] does."""
    if "csv" not in fmt:
        out.say(NVSMI_BAD_ARGS)
        return RC_INVALID_ARG
    units = "nounits" not in fmt
    if "noheader" not in fmt:
        header = []
        for field in fields:
            unit = rows[0][field][1] if rows else _FIELD_UNITS.get(field)
            header.append("%s [%s]" % (field, unit) if unit else field)
        out.say(", ".join(header) + "\n")
    for row in rows:
        cells = []
        for field in fields:
            value, unit = row[field]
            cells.append("%s %s" % (value, unit) if unit and units and not value.startswith("[") else value)
        out.say(", ".join(cells) + "\n")
    return RC_OK


_FIELD_UNITS = {"memory.total": "MiB", "memory.reserved": "MiB", "memory.used": "MiB", "memory.free": "MiB",
                "used_gpu_memory": "MiB", "used_memory": "MiB"}


def _split_fields(text):
    return [field.strip() for field in (text or "").split(",") if field.strip()]


def _render_query_gpu(state, gpus, opts, out):
    fields = _split_fields(opts.get("fields"))
    rows = [_gpu_fields(state, gpu, node.gpu_memory(state, gpu["index"])) for gpu in gpus]
    known = _gpu_fields(state, state["gpus"][0], node.gpu_memory(state, 0)) if state["gpus"] else {}
    for field in fields:
        if field not in known:
            out.say('Field "%s" is not a valid field to query.\n\n' % field)
            return RC_INVALID_ARG
    return _csv(rows, fields, opts["format"], out)


def _app_fields(state, gpu, holder):
    fields = _gpu_fields(state, gpu, node.gpu_memory(state, gpu["index"]))
    memory = str(holder["gpus"][str(gpu["index"])])
    fields.update({"pid": (str(holder["pid"]), None), "process_name": (holder["name"], None), "name": (holder["name"], None),
                   "used_gpu_memory": (memory, "MiB"), "used_memory": (memory, "MiB")})
    return fields


_APP_FIELDS = ("timestamp", "gpu_name", "gpu_bus_id", "gpu_serial", "gpu_uuid", "pid", "process_name", "name",
               "used_gpu_memory", "used_memory")


def _render_compute_apps(state, gpus, opts, out):
    fields = _split_fields(opts.get("fields"))
    for field in fields:
        if field not in _APP_FIELDS:
            out.say('Field "%s" is not a valid field to query.\n\n' % field)
            return RC_INVALID_ARG
    rows = [_app_fields(state, gpu, holder) for gpu in gpus for holder in _processes(state, gpu, ("C",))]
    return _csv(rows, fields, opts["format"], out)


def _render_table(state, gpus, opts, out):
    """A short default table: header, one line per GPU, then the processes (shape of the real one)."""
    rule = "+-----------------------------------------------------------------------------------------+\n"
    out.say(datetime.datetime.now().strftime("%a %b %d %H:%M:%S %Y") + "\n" + rule)
    out.say("| NVIDIA-SMI %-28s Driver Version: %-13s CUDA Version: %-9s|\n"
            % (state["driver_version"], state["driver_version"], state["cuda_version"]))
    out.say(rule)
    for gpu in gpus:
        mem = node.gpu_memory(state, gpu["index"])
        out.say("| %3d  %-30s %-3s | %s | %21s |\n" % (
            gpu["index"], gpu["name"][:30], "On" if gpu["persistence_mode"] else "Off", gpu["pci_bus_id"],
            "%dMiB / %dMiB" % (mem["used_mib"] + mem["reserved_mib"], mem["total_mib"])))
    out.say(rule + "| Processes:%78s|\n" % "")
    for gpu in gpus:
        for holder in _processes(state, gpu, ("C", "G")):
            out.say("| %4d   N/A  N/A  %8d %6s   %-36s %6dMiB |\n" % (
                gpu["index"], holder["pid"], holder.get("type", "C"), holder["name"][:36].replace("\n", " "),
                holder["gpus"][str(gpu["index"])]))
    out.say(rule)
    return RC_OK


def _render_xml(state, gpus, opts, out):
    """nvidia-smi -q -x in the v13 schema: the element names and nesting of the real captures."""
    lines = ['<?xml version="1.0" ?>', '<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v13.dtd">', "<nvidia_smi_log>"]
    add = lines.append
    add("\t<timestamp>%s</timestamp>" % datetime.datetime.now().strftime("%a %b %d %H:%M:%S %Y"))
    add("\t<driver_version>%s</driver_version>" % escape(state["driver_version"]))
    add("\t<cuda_version>%s</cuda_version>" % escape(state["cuda_version"]))
    add("\t<attached_gpus>%d</attached_gpus>" % len(state["gpus"]))
    for gpu in gpus:
        lines.extend(_xml_gpu(state, gpu))
        add("")
    add("</nvidia_smi_log>")
    out.say("\n".join(lines) + "\n")
    return RC_OK


def _element(indent, name, value):
    return "%s<%s>%s</%s>" % ("\t" * indent, name, escape(str(value)), name)


def _block(indent, name, children):
    tabs = "\t" * indent
    return ["%s<%s>" % (tabs, name)] + [_element(indent + 1, key, value) for key, value in children] + ["%s</%s>" % (tabs, name)]


def _xml_mig_devices(state, gpu):
    lines = []
    for device in sim_mig.devices(gpu, node.live_holders(state, gpu["index"])):
        total, used = device["memory_total_mib"], device["memory_used_mib"]
        lines += ["\t\t\t<mig_device>", _element(4, "index", device["index"]), _element(4, "gpu_instance_id", device["gi"]),
                  _element(4, "compute_instance_id", device["ci"])]
        lines += _block(4, "fb_memory_usage", [("total", "%d MiB" % total), ("reserved", "0 MiB"), ("used", "%d MiB" % used),
                                               ("free", "%d MiB" % (total - used))])
        lines.append("\t\t\t</mig_device>")
    return lines


def _xml_gpu(state, gpu):
    mem = node.gpu_memory(state, gpu["index"])
    bus = gpu["pci_bus_id"]
    mig = gpu.get("mig_mode")
    lines = ["\t<gpu id=%s>" % quoteattr(bus)]
    lines += [_element(2, "product_name", gpu["name"]), _element(2, "product_brand", "NVIDIA"),
              _element(2, "product_architecture", "Hopper"), _element(2, "display_mode", "Disabled"),
              _element(2, "display_attached", "No"), _element(2, "display_active", "Disabled"),
              _element(2, "persistence_mode", "Enabled" if gpu["persistence_mode"] else "Disabled"),
              _element(2, "addressing_mode", "None")]
    lines += _block(2, "mig_mode", [("current_mig", _mig_text(gpu, "current").strip("[]")),
                                    ("pending_mig", _mig_text(gpu, "pending").strip("[]"))])
    lines += ["\t\t<mig_devices>", "\t\t\tNone", "\t\t</mig_devices>"] if not (mig and mig.get("current")) else \
        ["\t\t<mig_devices>"] + _xml_mig_devices(state, gpu) + ["\t\t</mig_devices>"]
    lines += [_element(2, "accounting_mode", "Disabled"), _element(2, "accounting_mode_buffer_size", 4000)]
    lines += _block(2, "driver_model", [("current_dm", "N/A"), ("pending_dm", "N/A")])
    lines += [_element(2, "serial", node.gpu_serial(gpu)), _element(2, "uuid", gpu["uuid"]),
              _element(2, "minor_number", gpu.get("minor_number", gpu["index"])),
              _element(2, "vbios_version", "96.00.99.00.01"), _element(2, "multigpu_board", "No"),
              _element(2, "board_id", "0x%s" % bus[9:11].lstrip("0").lower() + "00"),
              _element(2, "gpu_recovery_action", RECOVERY_TEXT.get(gpu["recovery_action"], "None"))]
    lines += ["\t\t<pci>", _element(3, "pci_bus", bus[9:11]), _element(3, "pci_device", bus[12:14]),
              _element(3, "pci_domain", bus[4:8]), _element(3, "pci_base_class", 3), _element(3, "pci_sub_class", 2),
              _element(3, "pci_device_id", gpu["pci_device_id"]), _element(3, "pci_bus_id", bus),
              _element(3, "pci_sub_system_id", "16C110DE"), "\t\t</pci>"]
    lines += _block(2, "fb_memory_usage", [("total", "%d MiB" % mem["total_mib"]), ("reserved", "%d MiB" % mem["reserved_mib"]),
                                           ("used", "%d MiB" % mem["used_mib"]), ("free", "%d MiB" % mem["free_mib"])])
    lines += _block(2, "bar1_memory_usage", [("total", "131072 MiB"), ("used", "1 MiB"), ("free", "131071 MiB")])
    lines += [_element(2, "compute_mode", gpu["compute_mode"])]
    lines += ["\t\t<processes>"]
    for holder in _processes(state, gpu, ("C", "G")):
        instance = sim_mig.holder_instance(holder, gpu["index"]) or ("N/A", "N/A")
        lines += _block(3, "process_info", [("gpu_instance_id", instance[0]), ("compute_instance_id", instance[1]),
                                            ("pid", holder["pid"]), ("type", holder.get("type", "C")),
                                            ("process_name", holder["name"]),
                                            ("used_memory", "%d MiB" % holder["gpus"][str(gpu["index"])])])
    lines += ["\t\t</processes>", "\t\t<accounted_processes>", "\t\t</accounted_processes>"]
    lines += _block(2, "capabilities", [("egm", "disabled")])
    lines.append("\t</gpu>")
    return lines


def _reset_problem(state, root, gpu, chosen, users):
    """Why GPU cannot be reset now (a message line for the failure list), or None."""
    if state.get("reset_requires_nvlink_peers"):
        missing = [peer for peer in gpu["nvlink_peers"] if peer not in chosen]
        if missing:
            return "NVLink peers must be reset together (not selected: %s)" % ", ".join(
                node.find_gpu(state, peer)["pci_bus_id"] for peer in missing)
    if rules.reset_blockers(state, root, gpu["index"], users):
        return "In use by another client"
    return None


def _gpu_reset(root, indexes, out):
    """nvidia-smi --gpu-reset: all selected GPUs are reset, or none (the failure lists the ones that blocked)."""
    result = {}

    def attempt(state):
        gpus = [node.find_gpu(state, index) for index in indexes]
        lost = [gpu for gpu in gpus if gpu.get("lost")]
        if lost:
            result["lost"] = lost
            return
        primary = [gpu for gpu in gpus if gpu.get("primary")]
        if primary:
            result["primary"] = primary[0]
            return
        users = rules.device_users(root)
        problems = [(gpu, _reset_problem(state, root, gpu, indexes, users)) for gpu in gpus]
        result["problems"] = [(gpu, why) for gpu, why in problems if why]
        if not result["problems"]:
            for gpu in gpus:
                rules.clear_gpu_after_reset(gpu)
                mig_write.mig_after_reset(gpu)
            mig_write.hold_after_reset(state)
            result["done"] = gpus

    node.update_state(root, attempt)
    if result.get("done"):
        node.update_state(root, lambda state: _publish_mig(root, state))
    if "lost" in result:
        for gpu in result["lost"]:
            out.say(_lost_line(gpu))
        return RC_GPU_LOST
    if "primary" in result:
        out.say("GPU Reset couldn't run because GPU %s is the primary GPU.\n" % result["primary"]["pci_bus_id"])
        return RC_OTHER
    if result["problems"]:
        out.say("The following GPUs could not be reset:\n")
        for gpu, why in result["problems"]:
            out.say("  GPU %s: %s\n" % (gpu["pci_bus_id"], why))
        count = len(result["problems"])
        out.say("\n" + RESET_IN_USE_TAIL.format(count=count, devices="device is" if count == 1 else "devices are",
                                                this="this device" if count == 1 else "these devices"))
        return RC_OTHER
    for gpu in result["done"]:
        out.say("GPU %s was successfully reset.\n" % gpu["pci_bus_id"])
    out.say("All done.\n")
    return RC_OK


def _persistence_mode(root, indexes, value, out):
    if value not in ("0", "1", "ENABLED", "DISABLED"):
        out.say(NVSMI_BAD_ARGS)
        return RC_INVALID_ARG
    enable = value in ("1", "ENABLED")

    def apply(state):
        for index in indexes:
            node.find_gpu(state, index)["persistence_mode"] = enable

    state = node.update_state(root, apply)
    for index in indexes:
        bus = node.find_gpu(state, index)["pci_bus_id"]
        out.say(("Enabled Legacy persistence mode for GPU %s.\n" if enable else "Disabled persistence mode for GPU %s.\n") % bus)
    out.say("All done.\n")
    return RC_OK


# ---------------------------------------------------------------- modprobe and lsmod

def _module_name(text):
    return text.replace("-", "_")


def modprobe(argv, root, out):
    flags = set()
    args = []
    for arg in argv:
        if arg.startswith("-") and len(arg) > 1:
            if arg.startswith("--"):
                flags.add(arg)
            else:
                flags.update("-" + letter for letter in arg[1:])
        else:
            args.append(arg)
    if not args:
        out.warn("modprobe: ERROR: missing parameters. See -h.\n")
        return 1
    if "-r" in flags or "--remove" in flags:
        return _remove_modules([_module_name(arg) for arg in args], root, flags, out)
    return _insert_module(_module_name(args[0]), args[1:], root, flags, out)


def _not_found(name, out):
    out.warn("modprobe: FATAL: Module %s not found in directory /lib/modules/%s\n" % (name, os.uname()[2]))
    return 1


def _insert_module(name, params, root, flags, out):
    if name not in rules.KNOWN_MODULES:
        return _not_found(name, out)
    verbose = "-v" in flags or "--verbose" in flags
    result = {}

    def load(state):
        if state["modules"][name]["loaded"] and "--first-time" in flags:
            result["error"] = "modprobe: ERROR: could not insert '%s': Module already in kernel\n" % name
            return
        order = []
        _load_order(name, order)
        seq = max(info.get("load_seq", 0) for info in state["modules"].values())
        for module in order:
            info = state["modules"][module]
            if info["loaded"]:
                continue
            seq += 1
            info.update({"loaded": True, "load_seq": seq})
            if module == name:
                for param in params:
                    key, _sep, value = param.partition("=")
                    info["params"][key] = _param_value(value)
            if verbose:
                out.say("insmod /lib/modules/%s/kernel/drivers/video/%s.ko %s\n" % (
                    os.uname()[2], module.replace("_", "-"), " ".join(params) if module == name else ""))
        rules.write_module_views(root, state)

    node.update_state(root, load)
    if "error" in result:
        out.warn(result["error"])
        return 1
    return 0


def _param_value(value):
    """Boolean module parameters read back as Y/N from /sys, like the kernel shows them."""
    lowered = value.lower()
    if lowered in ("1", "y", "yes", "true", "on"):
        return "Y"
    if lowered in ("0", "n", "no", "false", "off"):
        return "N"
    return value


def _load_order(name, order):
    for dep in rules.MODULE_DEPENDS[name]:
        _load_order(dep, order)
    if name not in order:
        order.append(name)


def _remove_modules(names, root, flags, out):
    """modprobe -r a b c: each in turn (kmod goes on after a failure), then its unused dependencies."""
    verbose = "-v" in flags or "--verbose" in flags
    first_time = "--first-time" in flags
    counts = rules.module_users(root)
    rc = {"value": 0}

    def remove(state):
        for name in names:
            if name not in rules.KNOWN_MODULES:
                _not_found(name, out)
                rc["value"] = 1
                continue
            if not state["modules"][name]["loaded"]:
                if first_time:
                    out.warn("modprobe: FATAL: Module %s is not in kernel.\n" % name)
                    rc["value"] = 1
                continue
            if rules.module_refcount(state, name, counts) > 0:
                out.warn("modprobe: FATAL: Module %s is in use.\n" % name)
                rc["value"] = 1
                continue
            _unload(state, root, name, counts, verbose, out)
        rules.write_module_views(root, state)

    node.update_state(root, remove)
    return rc["value"]


def _unload(state, root, name, counts, verbose, out):
    info = state["modules"][name]
    if verbose:
        out.say("rmmod %s\n" % name)
    info["loaded"] = False
    if name == "nvidia":
        # The driver is gone: with it every GPU's leaked memory and pending recovery.
        for gpu in state["gpus"]:
            rules.clear_gpu_after_reset(gpu)
            mig_write.mig_after_reset(gpu)
        _publish_mig(root, state)
        state["driver_unloads"] = state.get("driver_unloads", 0) + 1
    for dep in rules.MODULE_DEPENDS[name]:
        if state["modules"][dep]["loaded"] and rules.module_refcount(state, dep, counts) == 0:
            _unload(state, root, dep, counts, verbose, out)


def lsmod(argv, root, out):
    state = node.load_state(root)
    counts = rules.module_users(root)
    out.say("Module                  Size  Used by\n")
    loaded = [(name, info) for name, info in state["modules"].items() if info.get("loaded")]
    for name, _info in sorted(loaded, key=lambda item: -item[1].get("load_seq", 0)):
        line = "%-19s %8d  %d" % (name, rules.MODULE_SIZES.get(name, 16384), rules.module_refcount(state, name, counts))
        users = rules.module_dependents(state, name)
        out.say(line + (" " + ",".join(users) if users else "") + "\n")
    return 0


# ---------------------------------------------------------------- systemctl

SYSTEMCTL_IGNORED = ("--no-pager", "--quiet", "-q", "--no-block", "--plain", "--no-legend", "--full", "--all", "-a",
                     "--no-ask-password", "--system")


def _service_key(state, unit):
    wanted = unit if unit.endswith((".service", ".target")) else unit + ".service"
    for name, service in state["services"].items():
        if wanted == service["unit"] or wanted in service.get("aliases", []) or wanted == name + ".service":
            return name
    return None


def _parse_systemctl(argv):
    opts = {"props": [], "value": False, "words": [], "quiet": False, "legend": "--no-legend" not in argv}
    args = list(argv)
    while args:
        arg = args.pop(0)
        if arg in ("-p", "--property"):
            opts["props"] += (args.pop(0) if args else "").split(",")
        elif arg.startswith("--property="):
            opts["props"] += arg.split("=", 1)[1].split(",")
        elif arg == "--value":
            opts["value"] = True
        elif arg == "--":
            opts["words"] += args
            break
        elif arg in ("-q", "--quiet"):
            opts["quiet"] = True
        elif arg.startswith(("--type=", "--state=")) or arg in SYSTEMCTL_IGNORED:
            continue
        elif arg in ("-t", "--type", "--state"):
            args.pop(0)
        else:
            opts["words"].append(arg)
    return opts


def systemctl(argv, root, out):
    opts = _parse_systemctl(argv)
    if not opts["words"]:
        return _list_units(root, out, opts["legend"])
    verb, units = opts["words"][0], opts["words"][1:]
    verbs = {"is-active": _is_active, "is-enabled": _is_enabled, "start": _start, "stop": _stop, "restart": _restart,
             "show": _show, "isolate": _isolate, "get-default": _get_default, "list-units": _list_units_verb,
             "daemon-reload": _daemon_reload}
    if verb not in verbs:
        out.warn("Unknown command verb '%s'.\n" % verb)
        return 1
    return verbs[verb](root, units, opts, out)


def _is_active(root, units, opts, out):
    state = node.load_state(root)
    rc = 0
    for unit in units:
        key = _service_key(state, unit)
        service = state["services"].get(key) if key else None
        active = bool(service and service["active"] and node.process_exists(service["pid"], service["start_time"]))
        if unit.endswith(".target"):
            active = unit == state["active_target"] or (unit == "multi-user.target")
        if not opts["quiet"]:
            out.say("active\n" if active else "inactive\n")
        rc = rc if active else 3
    return rc


def _is_enabled(root, units, opts, out):
    state = node.load_state(root)
    rc = 0
    for unit in units:
        key = _service_key(state, unit)
        if key is None:
            out.warn("Failed to get unit file state for %s: No such file or directory\n" % _full_unit(unit))
            rc = 1
            continue
        enabled = state["services"][key]["enabled"]
        out.say("enabled\n" if enabled else "disabled\n")
        rc = rc if enabled else 1
    return rc


def _full_unit(unit):
    return unit if "." in unit else unit + ".service"


def _units_or_fail(root, units, action, out):
    state = node.load_state(root)
    keys = []
    for unit in units:
        key = _service_key(state, unit)
        if key is None:
            out.warn("Failed to %s %s: Unit %s not found.\n" % (action, _full_unit(unit), _full_unit(unit)))
            return None
        keys.append(key)
    return keys


def _on_units(action, *steps):
    """A systemctl verb that applies `steps` (stop_service, start_service) to each named unit; rc 5 for an unknown one."""
    def verb(root, units, opts, out):
        keys = _units_or_fail(root, units, action, out)
        if keys is None:
            return 5
        for key in keys:
            for step in steps:
                step(root, key)
        return 0
    return verb


def _start_service(root, key):
    processes.start_service(root, key)


def _stop_service(root, key):
    processes.stop_service(root, key)


_start = _on_units("start", _start_service)
_stop = _on_units("stop", _stop_service)
_restart = _on_units("restart", _stop_service, _start_service)


def _command_line(name, pid):
    """One command of a unit's start as systemctl prints it; the simulated commands put a program in the background."""
    return ("{ path=/bin/sh ; argv[]=/bin/sh -c %s & ; ignore_errors=no ; start_time=[n/a] ; stop_time=[n/a] ; pid=%d ; "
            "code=exited ; status=0 }" % (name, pid))


def _scenario_unit_properties(unit, record):
    """What systemctl show says of a unit of the scenario's own (gpu_sim `units`): a command list is a list of lines."""
    props = {"Id": unit, "LoadState": "loaded", "ActiveState": record["active"], "SubState": record["sub"],
             "Result": record["result"], "MainPID": "0", "UnitFileState": "static", "Description": unit,
             "ExecMainPID": "0"}
    for name, pid in record["commands"]:
        props.setdefault(name, []).append(_command_line(name, pid))
        if name == "ExecStart":
            props["ExecMainPID"] = str(pid)  # the last start line's, as systemd keeps it
    return props


def _unit_properties(state, unit, described=True):
    """described: with the unit's Description (what `systemctl show` prints only when asked, or with every property)."""
    if unit in (state.get("units") or {}):
        return _scenario_unit_properties(unit, state["units"][unit])
    key = _service_key(state, unit)
    service = state["services"].get(key) if key else None
    if service is None:
        return {"Id": _full_unit(unit), "LoadState": "not-found", "ActiveState": "inactive", "SubState": "dead",
                "MainPID": "0", "UnitFileState": ""}
    active = service["active"] and node.process_exists(service["pid"], service["start_time"])
    props = {"Id": service["unit"], "LoadState": "loaded", "ActiveState": "active" if active else "inactive",
             "SubState": "running" if active else "dead", "MainPID": str(service["pid"] if active else 0),
             "UnitFileState": "enabled" if service["enabled"] else "disabled"}
    if described:
        props["Description"] = processes.SERVICES[key]["description"]
    return props


def _show(root, units, opts, out):
    state = node.load_state(root)
    for number, unit in enumerate(units):
        props = _unit_properties(state, unit, described=not opts["props"] or "Description" in opts["props"])
        names = opts["props"] or sorted(props)
        if number:
            out.say("\n")
        for name in names:
            value = props.get(name, "")
            for line in value if isinstance(value, list) else [value]:
                out.say("%s\n" % line if opts["value"] else "%s=%s\n" % (name, line))
    return 0


def _isolate(root, units, opts, out):
    target = units[0] if units else ""
    if target not in ("multi-user.target", "graphical.target"):
        out.warn("Failed to isolate %s: Unit %s not found.\n" % (target, target))
        return 5
    if target == "multi-user.target":
        processes.stop_service(root, "display-manager")
    else:
        processes.start_service(root, "display-manager")

    def record(state):
        state["active_target"] = target

    node.update_state(root, record)
    return 0


def _get_default(root, units, opts, out):
    out.say(node.load_state(root)["default_target"] + "\n")
    return 0


def _daemon_reload(root, units, opts, out):
    return 0


def _list_units_verb(root, units, opts, out):
    return _list_units(root, out, opts["legend"])


def _list_units(root, out, legend=False):
    state = node.load_state(root)
    rows = []
    for key in sorted(state["services"]):
        props = _unit_properties(state, key)
        if props["ActiveState"] == "active":
            rows.append((props["Id"], "loaded", "active", "running", props["Description"]))
    width = max([len(row[0]) for row in rows] + [4])
    if legend:
        out.say("%-*s LOAD   ACTIVE SUB     DESCRIPTION\n" % (width, "UNIT"))
    for row in rows:
        out.say("%-*s %-6s %-6s %-7s %s\n" % ((width,) + row))
    if legend:
        out.say("\n%d loaded units listed.\n" % len(rows))
    return 0


# ---------------------------------------------------------------- loginctl

def loginctl(argv, root, out):
    """logind's answer for the node's sessions (state["logind"]): list-sessions, show-session --property=State --value."""
    sessions = node.load_state(root).get("logind") or {}
    words = [arg for arg in argv if not arg.startswith("-")]
    if words[:1] == ["list-sessions"]:
        for session in sorted(sessions):
            out.say("%7s 0 root\n" % session)
        return 0
    if words[:1] == ["show-session"] and len(words) == 2 and "--value" in argv and "--property=State" in argv:
        if words[1] not in sessions:
            out.warn("Failed to get session path: No session '%s' known\n" % words[1])
            return 1
        out.say("%s\n" % sessions[words[1]])
        return 0
    out.warn("loginctl: the simulated node answers list-sessions and show-session --property=State --value only\n")
    return 1
