# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The simulated Windows node's tools, answered with the shapes of the real captures: nvidia-smi -q -x, pnputil,
quser, taskkill, logoff, wsl.exe (UTF-16LE).
"""

from __future__ import annotations

import time

from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.node import _output_encoding
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.tools import _wsl_cli
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.simulation._simulated_state import (
    MIB, WinSimError, _descendants, _kill_refusal, _pnp_devices, _process, _restart_shell, _start_vm, _stop_vm, process_memory,
    stop_distribution,
)


_NOT_FOUND_DISTRIBUTION = "There is no distribution with the supplied name.\r\nError code: Wsl/Service/WSL_E_DISTRO_NOT_FOUND\r\n"


class SimCommand:
    """What a tool wrote: exit status and the raw bytes of stdout and stderr."""

    def __init__(self, rc, stdout=b"", stderr=b""):
        self.rc, self.stdout, self.stderr = rc, stdout, stderr


def _gpu_used_mib(state, gpu):
    used = sum(process_memory(state, p).get(gpu["luid"], {}).get("dedicated_bytes", 0) for p in state["processes"])
    return used // MIB + gpu["ghost_mib"]


def _smi_processes(state, gpu):
    # The VM's allocations are the counters' to show: host nvidia-smi lists the Windows processes.
    return [p for p in state["processes"] if not p.get("wsl_vm_of") and p["gpu_memory"].get(gpu["luid"], {}).get("dedicated_bytes")]


def _nvidia_smi(state, args, _caller):
    if args != ["-q", "-x"]:
        return SimCommand(0, b"", b"") if not args else SimCommand(
            2, ("Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\r\n").encode(), b"")
    lines = ['<?xml version="1.0" ?>', '<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">', "<nvidia_smi_log>",
             "\t<timestamp>%s</timestamp>" % time.strftime("%a %b %d %H:%M:%S %Y", time.gmtime(state["clock_ms"] / 1000)),
             "\t<driver_version>%s</driver_version>" % state["driver_version"],
             "\t<cuda_version>%s</cuda_version>" % state["cuda_version"],
             "\t<attached_gpus>%d</attached_gpus>" % len(state["gpus"])]
    for gpu in state["gpus"]:
        lines.extend(_smi_gpu(state, gpu))
    lines.append("</nvidia_smi_log>")
    return SimCommand(0, ("\r\n".join(lines) + "\r\n").encode("utf-8"))


def _smi_gpu(state, gpu):
    used = _gpu_used_mib(state, gpu)
    free = gpu["memory_mib"] - gpu["reserved_mib"] - used
    bus = gpu["pci_bus_id"]
    lines = ['\t<gpu id="%s">' % bus, "\t\t<product_name>%s</product_name>" % _xml(gpu["name"]),
             "\t\t<persistence_mode>N/A</persistence_mode>",
             "\t\t<mig_mode>", "\t\t\t<current_mig>N/A</current_mig>", "\t\t\t<pending_mig>N/A</pending_mig>", "\t\t</mig_mode>",
             "\t\t<driver_model>", "\t\t\t<current_dm>%s</current_dm>" % gpu["driver_model"],
             "\t\t\t<pending_dm>%s</pending_dm>" % gpu["driver_model"], "\t\t</driver_model>",
             "\t\t<uuid>%s</uuid>" % gpu["uuid"], "\t\t<minor_number>N/A</minor_number>",
             "\t\t<pci>", "\t\t\t<pci_bus>%s</pci_bus>" % bus[9:11], "\t\t\t<pci_device>%s</pci_device>" % bus[12:14],
             "\t\t\t<pci_domain>%s</pci_domain>" % bus[4:8], "\t\t\t<pci_bus_id>%s</pci_bus_id>" % bus, "\t\t</pci>",
             "\t\t<gpu_recovery_action>%s</gpu_recovery_action>" % gpu["recovery_action"],
             "\t\t<fb_memory_usage>", "\t\t\t<total>%d MiB</total>" % gpu["memory_mib"],
             "\t\t\t<reserved>%d MiB</reserved>" % gpu["reserved_mib"], "\t\t\t<used>%d MiB</used>" % used,
             "\t\t\t<free>%d MiB</free>" % free, "\t\t</fb_memory_usage>", "\t\t<compute_mode>Default</compute_mode>",
             "\t\t<processes>"]
    for process in _smi_processes(state, gpu):
        memory = process["gpu_memory"][gpu["luid"]]["dedicated_bytes"] // MIB
        lines.extend(["\t\t\t<process_info>", "\t\t\t\t<gpu_instance_id>N/A</gpu_instance_id>",
                      "\t\t\t\t<compute_instance_id>N/A</compute_instance_id>", "\t\t\t\t<pid>%d</pid>" % process["pid"],
                      "\t\t\t\t<type>%s</type>" % (process.get("smi_type") or ("C+G" if process["session_id"] else "C")),
                      "\t\t\t\t<process_name>%s</process_name>" % _xml(process["image_path"] or process["name"]),
                      "\t\t\t\t<used_memory>%s</used_memory>" % ("N/A" if gpu["driver_model"] == "WDDM" else "%d MiB" % memory),
                      "\t\t\t</process_info>"])
    lines.extend(["\t\t</processes>", "\t</gpu>"])
    return lines


def _xml(text):
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _pnputil(state, args, _caller):
    if [a.lower() for a in args] == ["/enum-devices", "/class", "display"]:
        blocks = ["Microsoft PnP Utility", ""]
        for adapter in _pnp_devices(state):
            blocks.extend(["Instance ID:                %s" % adapter["instance_id"],
                           "Device Description:         %s" % adapter["name"],
                           "Class Name:                 Display",
                           "Class GUID:                 {4d36e968-e325-11ce-bfc1-08002be10318}",
                           "Manufacturer Name:          %s" % adapter["manufacturer"],
                           "Status:                     %s" % adapter["adapter_status"],
                           "Driver Name:                oem%d.inf" % adapter["inf"], ""])
        return SimCommand(0, "\r\n".join(blocks).encode())
    if len(args) == 2 and args[0].lower() == "/restart-device":
        return _restart_device(state, args[1])
    return SimCommand(1, b"Microsoft PnP Utility\r\n\r\nInvalid arguments.\r\n")


def _restart_device(state, instance_id):
    for gpu in state["gpus"]:
        if gpu["instance_id"].lower() == instance_id.lower() and gpu.get("restart_needs_reboot"):
            # ERROR_SUCCESS_REBOOT_REQUIRED: the restart waits for a reboot, the driver keeps what it holds. The text
            # is ours (no capture of it); the plugins read the exit code.
            return SimCommand(3010, ("Microsoft PnP Utility\r\n\r\nRestarting device:          %s\r\n"
                                     "System reboot is needed to complete restart operations.\r\n" % instance_id).encode())
        if gpu["instance_id"].lower() == instance_id.lower():
            gpu["restarts"] += 1
            gpu["ghost_mib"] = 0
            gpu["recovery_action"] = "None"
            # pnputil exits 0 and its listing still says "Started": only ConfigManagerErrorCode tells the driver stopped it
            gpu["problem_code"] = gpu.get("problem_after_restart") or 0
            return SimCommand(0, ("Microsoft PnP Utility\r\n\r\nRestarting device:          %s\r\n"
                                  "Device restarted successfully.\r\n" % instance_id).encode())
    return SimCommand(1, ("Microsoft PnP Utility\r\n\r\nRestarting device:          %s\r\n"
                          "Failed to restart device:   %s\r\n\r\nThe system cannot find the file specified.\r\n"
                          % (instance_id, instance_id)).encode())


def _quser(state, args, _caller):
    if args:
        return SimCommand(1, b"", ("No User exists for %s\r\n" % args[0]).encode())
    if not state["sessions"]:
        return SimCommand(1, b"", b"No User exists for *\r\n")
    rows = [" USERNAME              SESSIONNAME        ID  STATE   IDLE TIME  LOGON TIME"]
    for session in state["sessions"]:
        cells = (session["user"][:20], session["session_name"] or "", session["id"], session["state"], "none", session["logon_time"])
        rows.append(" %-21s %-18s %2d  %-6s %10s  %s" % cells)
    # in the console's OEM code page, as quser writes to a pipe (a character the code page lacks becomes "?")
    return SimCommand(0, ("\r\n".join(rows) + "\r\n").encode(oem_codec(state), "replace"))


def oem_codec(state):
    return _output_encoding.oem_codec(state.get("oem_code_page", 437))


def _taskkill(state, args, caller):
    upper = [a.upper() for a in args]
    if "/PID" not in upper or upper.index("/PID") + 1 >= len(args) or not args[upper.index("/PID") + 1].isdigit():
        return SimCommand(1, b"", b'ERROR: Invalid syntax. Type "TASKKILL /?" for usage.\r\n')
    pid = int(args[upper.index("/PID") + 1])
    target = _process(state, pid)
    if target is None:
        return SimCommand(128, b"", ('ERROR: The process "%d" not found.\r\n' % pid).encode())
    if "/F" not in upper:
        return SimCommand(1, b"", ("ERROR: The process with PID %d could not be terminated.\r\n"
                                   "Reason: This process can only be terminated forcefully (with /F option).\r\n" % pid).encode())
    tree = _descendants(state, pid) if "/T" in upper else []
    out, err = [], []
    for process in tree + [target]:
        refusal = _kill_refusal(state, process, caller)
        child = " (child process of PID %d)" % process["ppid"] if process is not target else ""
        if refusal:
            err.append("ERROR: The process with PID %d%s could not be terminated.\r\nReason: %s\r\n" % (process["pid"], child, refusal))
        else:
            state["processes"].remove(process)
            out.append("SUCCESS: The process with PID %d%s has been terminated.\r\n" % (process["pid"], child))
            _restart_shell(state, process)
    rc = 0 if not err else 1 if not out else 255
    return SimCommand(rc, "".join(out).encode(), "".join(err).encode())


def _logoff(state, args, caller):
    """`logoff <id>`: silent with exit 0 when the session ends (what logoff.exe does). Its error lines are ours (no
    capture of them); the plugins read the exit code and then whether quser still lists the session."""
    if len(args) != 1 or not args[0].isdigit():
        return SimCommand(1, b"", b"Invalid parameter(s)\r\nTerminates a session.\r\n")
    session_id = int(args[0])
    session = next((s for s in state["sessions"] if s["id"] == session_id), None)
    if session is None:
        return SimCommand(1, b"", ("Could not logoff session ID %d, Error code 7022\r\n"
                                   "Error [7022]:The specified session cannot be found.\r\n" % session_id).encode())
    if session["user"].lower() != caller.lower() and caller.lower() not in [a.lower() for a in state["administrators"]]:
        return SimCommand(1, b"", ("Could not logoff session ID %d, Error code 5\r\nError [5]:Access is denied.\r\n" % session_id).encode())
    state["sessions"].remove(session)
    state["processes"] = [p for p in state["processes"] if p["session_id"] != session_id]
    return SimCommand(0, b"")


def utf16(text):
    """What wsl.exe writes: UTF-16LE without a BOM, CR LF newlines."""
    return text.replace("\r\n", "\n").replace("\n", "\r\n").encode("utf-16-le")


# What a wsl.exe without WSL behind it answers every command (the optional component is not enabled).
_NOT_INSTALLED = (0x8007019E - 0x100000000, "The Windows Subsystem for Linux optional component is not enabled. Please enable it and try again.\r\n"
                                            "Error code: Wsl/WSL_E_WSL_OPTIONAL_COMPONENT_REQUIRED\r\n")


def _wsl(state, args, caller):
    if state.get("wsl") == "absent":
        raise WinSimError("wsl.exe could not be run: The system cannot find the file specified")
    if state.get("wsl") == "not_installed":
        return SimCommand(_NOT_INSTALLED[0], utf16(_NOT_INSTALLED[1]))
    mine = [d for d in state["distributions"] if d["owner"].lower() == caller.lower()]
    options = [a.lower() for a in args]
    if options and options[0] in ("--list", "-l"):
        return _wsl_list(mine, set(options[1:]))
    if options == ["--status"]:
        return SimCommand(0, utf16("Default Distribution: %s\nDefault Version: 2\n" % next((d["name"] for d in mine if d["default"]), "")))
    if options == ["--shutdown"]:
        for distribution in mine:
            stop_distribution(state, distribution)
        _stop_vm(state, caller)
        return SimCommand(0, b"")
    if len(args) == 2 and options[0] in ("--terminate", "-t"):
        return _wsl_terminate(state, mine, args[1], caller)
    if len(args) > 5 and options[0] in ("--distribution", "-d") and options[2:5] == ["--user", "root", "--exec"]:
        return _wsl_exec(state, mine, args[1], args[5:], caller)
    return SimCommand(-1, utf16("Invalid command line argument: %s\r\nPlease use 'wsl.exe --help' to get a list of supported arguments.\r\n"
                                % (" ".join(args) or "(none)")))


def _wsl_exec(state, mine, name, command, caller):
    """The /dev/dxg probe (_wsl_cli.gpu_probe_argv) inside one distribution, as its root: a stopped one is started
    first, as wsl.exe does. Linux's output passes through as it is (UTF-8)."""
    distribution = next((d for d in mine if d["name"].lower() == name.lower()), None)
    if distribution is None:
        return SimCommand(-1, utf16(_NOT_FOUND_DISTRIBUTION))
    if not distribution["running"]:
        distribution["running"] = True
        _start_vm(state, caller)
    if command[:1] != ["find"] or _wsl_cli.GPU_DEVICE not in command:
        raise WinSimError("the simulated distributions answer only the /dev/dxg probe, not %r" % (command,))
    if not distribution["gpu_probe"]:
        return SimCommand(1, b"", ("<3>WSL (%d) ERROR: CreateProcessCommon:559: execvpe(find) failed: No such file or directory\n"
                                   % (200 + mine.index(distribution))).encode())
    lines = ["/proc/%d/fd/%d\n" % (300 + 10 * mine.index(distribution) + n, 9 + n) for n in range(2)] if distribution["gpu_memory"] else []
    return SimCommand(0, "".join(lines).encode())


def _wsl_list(mine, flags):
    running = bool(flags & {"--running"})
    shown = [d for d in mine if d["running"] or not running]
    if flags & {"--quiet", "-q"}:
        return SimCommand(0, utf16("".join(d["name"] + "\n" for d in shown)))
    if not shown:
        sentence = "There are no running distributions." if running else "Windows Subsystem for Linux has no installed distributions."
        return SimCommand(-1, utf16(sentence + "\n"))
    if flags & {"--verbose", "-v"}:
        width = max(len(d["name"]) for d in shown) + 2
        rows = ["  " + "NAME".ljust(width) + "STATE".ljust(16) + "VERSION"]
        rows.extend(("* " if d["default"] else "  ") + d["name"].ljust(width) + ("Running" if d["running"] else "Stopped").ljust(16)
                    + str(d["version"]) for d in shown)
        return SimCommand(0, utf16("\n".join(rows) + "\n"))
    return SimCommand(0, utf16("Windows Subsystem for Linux Distributions:\n" +
                               "".join(d["name"] + (" (Default)" if d["default"] else "") + "\n" for d in shown)))


def _wsl_terminate(state, mine, name, caller):
    distribution = next((d for d in mine if d["name"].lower() == name.lower()), None)
    if distribution is None:
        return SimCommand(-1, utf16(_NOT_FOUND_DISTRIBUTION))
    stop_distribution(state, distribution)
    if not any(d["running"] for d in mine):
        _stop_vm(state, caller)
    return SimCommand(0, utf16("The operation completed successfully.\n"))


# The plugins never run taskkill through win_command: the terminate_held script runs it on the host (taskkill_in_script).
_TOOLS = {"nvidia-smi": _nvidia_smi, "pnputil": _pnputil, "quser": _quser, "taskkill": _taskkill, "wsl": _wsl, "logoff": _logoff}


def taskkill_in_script(state, args, caller):
    """taskkill as a script on the host runs it (the terminate_held script), logged as a command the host ran."""
    state["command_log"].append({"argv": ["taskkill"] + list(args), "user": caller, "by_script": True})
    return _taskkill(state, list(args), caller)
