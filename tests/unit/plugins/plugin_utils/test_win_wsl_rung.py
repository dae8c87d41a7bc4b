# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The WSL rung (issue 18): which VM is WSL's and whose (_wsl_vm_identity), which distribution holds the GPU (/dev/dxg),
the rung's one plan (_verdict.wsl_plan), wsl_shutdown judged by facts, a host without WSL skipped.

The walk and the module run against the simulated Windows node (SimulatedNode) and through the real-host path
(TargetNode), whose module calls the simulated node answers with wsl.exe's words rewritten into the host's languages
(the MessageNoRunningDistro strings of tests/unit/plugins/fixtures/windows/wsl, UTF-16LE with and without a BOM) and,
where a test says so, with wsl.exe lying about what it did.
"""

from __future__ import annotations

import codecs
import json

import pytest

from ansible_collections.gpuops.remediation.plugins.module_utils._verdict import wsl_plan
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.node import _output_encoding, _remote_node
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.simulation import _simulated_node
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows import _node_snapshot
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.tools import _wsl_cli
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.protect import _wsl_vm_identity
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.rungs import _wsl_shutdown
from ansible_collections.gpuops.remediation.tests.unit.helpers.win_host import SimulatedHost, target
from ansible_collections.gpuops.remediation.tests.unit.helpers.win_walk import command_log as commands, running, stops, wsl_node as build, wsl_walk as walk

HYPERV_VM = "1C1B3E9B-8F1B-4C8A-9C73-9E0A0A6D1E2F"


# ---- helpers ---------------------------------------------------------------------------------------------------------

def plan_lines(outcome):
    return [line for rung in outcome["rungs_tried"] for line in rung["plan"]]


# ---- which VM is WSL's, and whose ------------------------------------------------------------------------------------

def test_a_vm_account_sid_is_its_vm_id_both_ways():
    sid = _wsl_vm_identity.sid_of_vm_id(HYPERV_VM)
    assert sid.startswith("S-1-5-83-1-") and _wsl_vm_identity.vm_id_from_sid(sid) == HYPERV_VM.lower()
    assert _wsl_vm_identity.vm_id_from_sid("S-1-5-18") is None and _wsl_vm_identity.vm_id_from_sid(None) is None
    assert _wsl_vm_identity.vm_id_from_sid("S-1-5-83-1-1-2-3-99999999999") is None


@pytest.mark.parametrize("account, vm_id", [
    ("NT VIRTUAL MACHINE\\%s" % HYPERV_VM, HYPERV_VM.lower()),
    ("NT-VIRTUELLER COMPUTER\\{%s}" % HYPERV_VM.lower(), HYPERV_VM.lower()),  # the domain part is not read
    ("NT VIRTUAL MACHINE\\7A1B", None), ("WS12\\ada", None), (None, None), ("%s" % HYPERV_VM, None),
])
def test_the_vm_id_from_the_account_is_the_guid_after_the_domain(account, vm_id):
    assert _wsl_vm_identity.vm_id_from_account(account) == vm_id


def vm(name, vm_id=None, sid=True, pid=1036):
    return {"pid": pid, "name": name, "role": "vm", "user": None,
            "owner_sid": _wsl_vm_identity.sid_of_vm_id(vm_id) if vm_id and sid else None, "creation_time_ms": 5}


WSL_ID = "6f2c1f0e-2b8d-4f38-9f0c-2d1f4a3b5c6d"


@pytest.mark.parametrize("name, systems, kind, source", [
    ("vmmemWSL", {WSL_ID: "WSL"}, "wsl", "hcs"),
    ("vmmem", {WSL_ID: "WSL"}, "wsl", "hcs"),            # an older build's WSL VM: HCS says so, not the name
    ("vmmemWSL", {WSL_ID: "VMMS"}, "other", "hcs"),      # the fact wins over the name
    ("vmmem", {}, "other", "hcs"),                       # HCS answered and does not list it as WSL's
    ("vmmemWSL", None, "wsl", "name"),                   # no HCS: the name Windows gives only the WSL VM
    ("vmmem", None, None, None),                         # no HCS: a plain vmmem is not known to be WSL's
])
def test_which_vm_is_wsl_s(name, systems, kind, source):
    process = vm(name, WSL_ID)
    _wsl_vm_identity.identify([process], systems)
    assert (process["vm_kind"], process["vm_kind_source"], process["vm_id"]) == (kind, source, WSL_ID)


def test_whose_wsl_vm_is_read_from_the_wsl_process_naming_it():
    processes = [vm("vmmemWSL", WSL_ID), vm("vmmemWSL", HYPERV_VM, pid=2000),
                 {"pid": 3000, "name": "wslrelay.exe", "role": None, "user": "WS12\\ada", "vm_id_arg": "{%s}" % WSL_ID.upper()},
                 {"pid": 3001, "name": "wslhost.exe", "role": None, "user": "WS12\\bob", "vm_id_arg": HYPERV_VM},
                 {"pid": 3002, "name": "wslhost.exe", "role": None, "user": "WS12\\carol", "vm_id_arg": HYPERV_VM}]
    ada, shared = _wsl_vm_identity.identify(processes, {WSL_ID: "WSL", HYPERV_VM.lower(): "WSL"})
    assert ada["wsl_owner"] == "WS12\\ada" and _wsl_vm_identity.owned_by(ada, "ADA") is True and _wsl_vm_identity.owned_by(ada, "bob") is False
    # two users name one VM: whose it is is not known, and it is never taken for either's
    assert shared["wsl_owner"] is None and _wsl_vm_identity.owned_by(shared, "bob") is None


def test_hcs_answer_is_read_as_json_and_anything_else_is_refused():
    text = json.dumps([{"Id": WSL_ID.upper(), "SystemType": "VirtualMachine", "Owner": "WSL", "State": "Running"},
                       {"Id": HYPERV_VM, "SystemType": "VirtualMachine", "Owner": "VMMS"}])
    assert _wsl_vm_identity.parse_compute_systems(text) == {WSL_ID: "WSL", HYPERV_VM.lower(): "VMMS"}
    assert _wsl_vm_identity.parse_compute_systems("[null]") == {}
    with pytest.raises(ValueError):
        _wsl_vm_identity.parse_compute_systems(json.dumps([{"Id": "not a guid", "Owner": "WSL"}]))


@pytest.mark.parametrize("constrained", [False, True])
def test_a_hyper_v_vm_holding_the_gpu_is_no_wsl_vm_and_no_rung_acts_on_it(tmp_path, constrained):
    # the account is a GUID HCS lists as Hyper-V's; under Constrained Language Mode HCS cannot be asked and a plain
    # vmmem is not known to be WSL's: either way it is class vm, and the idle WSL of ada is never stopped
    node = build(tmp_path, constrained_language=constrained, distributions=[{"name": "Ubuntu", "memory_mib": 0}],
                 processes=[{"name": "vmmem", "memory_mib": 4096, "user": "NT VIRTUAL MACHINE\\%s" % HYPERV_VM, "session_id": 0}])
    snapshot = _node_snapshot.take(node)
    [hyperv] = [h for h in snapshot["holders"] if h["name"] == "vmmem"]
    assert hyperv["class"] == "vm" and not hyperv["wsl_vm"]
    assert hyperv["vm_kind"] == (None if constrained else "other")
    assert snapshot["probes"]["hcs"]["ok"] is not constrained
    assert wsl_plan(snapshot)["terminate"] == [] and not wsl_plan(snapshot)["shutdown"]
    outcome = walk(node, max_rung="restart_adapter")
    assert stops(node.root) == [] and running(node.root) == ["Ubuntu"]
    # a running VM's hold is a running workload, not a leak: nothing to do, the adapter never restarted under it
    assert snapshot["gpus"][0]["state"] == "in_use" and outcome["status"] == "clean"
    assert not [argv for argv in commands(node.root) if "/restart-device" in argv]


@pytest.mark.parametrize("check_mode", [True, False])
def test_an_adapter_restart_is_refused_while_a_running_vm_holds_the_gpu(tmp_path, check_mode):
    node = build(tmp_path, gpus=[{"ghost_mib": 2048}],
                 processes=[{"name": "vmmem", "memory_mib": 4096, "user": "NT VIRTUAL MACHINE\\%s" % HYPERV_VM, "session_id": 0}])
    outcome = walk(node, check_mode=check_mode, max_rung="restart_adapter")
    assert not [argv for argv in commands(node.root) if "/restart-device" in argv]
    # Refused before any rung (the walk's busy_evidence, as on Linux), check mode as the real run
    assert outcome["status"] == "refused" and outcome["rungs_tried"] == []
    assert outcome["msg"].startswith("GPU 0: the evidence needs the restart_adapter rung (")
    assert "which would end the working programs that hold it: pid " in outcome["msg"] and "a running virtual machine" in outcome["msg"]
    assert HYPERV_VM.lower() in outcome["msg"] and outcome["msg"].endswith("end_running_jobs would allow it")


def test_an_older_build_s_wsl_vm_named_vmmem_is_wsl_s_by_hcs(tmp_path):
    node = build(tmp_path, wsl_vm_name="vmmem", distributions=[{"name": "Ubuntu", "memory_mib": 2048}])
    [holder] = [h for h in _node_snapshot.take(node)["holders"] if h["name"] == "vmmem"]
    assert holder["class"] == "wsl_vm" and holder["vm_kind_source"] == "hcs" and holder["wsl_owner"] == "WS12\\ada"
    assert walk(node)["status"] == "fixed" and stops(node.root) == [["--terminate", "Ubuntu"]]


def test_without_hcs_an_older_build_s_vmmem_is_left_alone(tmp_path):
    node = build(tmp_path, wsl_vm_name="vmmem", constrained_language=True, distributions=[{"name": "Ubuntu", "memory_mib": 2048}])
    [holder] = [h for h in _node_snapshot.take(node)["holders"] if h["name"] == "vmmem"]
    assert holder["class"] == "vm"
    walk(node)
    assert stops(node.root) == [] and running(node.root) == ["Ubuntu"]


# ---- which distribution holds the GPU ---------------------------------------------------------------------------------

def test_the_dxg_probe_is_an_argv_with_the_name_as_one_element():
    argv = _wsl_cli.gpu_probe_argv("Ubuntu-22.04", _wsl_cli.STORE_WSL_PATH)
    assert argv[:6] == [_wsl_cli.STORE_WSL_PATH, "--distribution", "Ubuntu-22.04", "--user", "root", "--exec"]
    assert argv[6:] == ["find", "/proc", "-mindepth", "3", "-maxdepth", "3", "-path", "/proc/[0-9]*/fd/*", "-lname", "/dev/dxg"]
    for hostile in ("--shutdown", "Ubuntu; wsl --shutdown", "a b", "-u"):
        with pytest.raises(ValueError):
            _wsl_cli.gpu_probe_argv(hostile)


@pytest.mark.parametrize("text, rc, holds, pids", [
    ("/proc/312/fd/9\n/proc/312/fd/10\n/proc/48/fd/3\n", 0, True, [48, 312]),
    ("", 0, False, []),
    ("/proc/312/fd/9\n", 1, True, [312]),  # find exits 1 when a process it read exited meanwhile: the line stands
    ("", 1, None, []),
    ("find: not found\n", 127, None, []),
    ("/proc/312/fd/9\nsomething else\n", 0, None, []),
    ("Le processus a échoué.\n", 0, None, []),
])
def test_the_dxg_probe_is_read_by_its_lines_and_exit(text, rc, holds, pids):
    found = _wsl_cli.parse_gpu_probe(text, rc)
    assert (found["holds_gpu"], found["pids"]) == (holds, pids)
    assert (found["error"] is None) is (holds is not None)


# ---- rule 1 and 4: terminate exactly the holders, shut down only what is left --------------------------------------

def test_only_the_distribution_holding_the_gpu_is_terminated_and_check_mode_predicts_it(tmp_path):
    scenario = {"distributions": [{"name": "Ubuntu-22.04", "memory_mib": 3072}, {"name": "docker-desktop", "memory_mib": 0}]}
    predicted = walk(build(tmp_path / "check", **scenario), check_mode=True)
    node = build(tmp_path / "real", **scenario)
    done = walk(node)
    assert stops(node.root) == [["--terminate", "Ubuntu-22.04"]]
    assert running(node.root) == ["docker-desktop"]
    assert done["status"] == "fixed" and done["fixed_by"] == "wsl"
    assert [line.replace("would stop", "stopped").replace("would run", "ran") for line in plan_lines(predicted)] == plan_lines(done)
    assert stops(tmp_path / "check" / "ws12") == []
    again = walk(node)
    assert again["status"] == "clean" and stops(node.root) == [["--terminate", "Ubuntu-22.04"]]


def test_a_distribution_holding_nothing_is_never_stopped_even_with_a_protected_holder(tmp_path):
    # defect 1: a protected compute holder makes the walk climb; the wsl rung has nothing to get back
    node = build(tmp_path, distributions=[{"name": "Ubuntu", "memory_mib": 0}],
                 processes=[{"name": "render.exe", "memory_mib": 2048}])
    for check_mode in (True, False):
        walk(node, check_mode=check_mode, protect_names=["render"], max_rung="restart_adapter")
        assert stops(node.root) == [] and running(node.root) == ["Ubuntu"]
    snapshot = _node_snapshot.take(node)
    assert snapshot["wsl"]["distributions"] == []  # no WSL VM holds a GPU: not even asked
    assert wsl_plan(snapshot)["reason"].startswith("no WSL VM of ada holds a GPU")


def test_a_distribution_whose_hold_cannot_be_known_makes_the_rung_shut_the_vm_down_saying_which(tmp_path):
    scenario = {"distributions": [{"name": "Ubuntu", "memory_mib": 1024}, {"name": "Alpine", "memory_mib": 512, "gpu_probe": False}]}
    predicted = walk(build(tmp_path / "check", **scenario), check_mode=True)
    node = build(tmp_path / "real", **scenario)
    done = walk(node)
    assert stops(node.root) == [["--terminate", "Ubuntu"], ["--shutdown"]]  # the holders first, then the VM
    assert running(node.root) == [] and done["status"] == "fixed"
    assert [line.replace("would stop", "stopped").replace("would run", "ran") for line in plan_lines(predicted)] == plan_lines(done)
    assert [line for line in plan_lines(done) if line.startswith("no per-distribution attribution for Alpine")]


def test_the_vm_is_shut_down_only_when_it_still_holds_memory_after_the_terminate(tmp_path):
    # Ubuntu's memory stays with the VM after it stops (a guest-kernel leak): check mode cannot know that; the real
    # run finds it from the counters after the terminate, shuts the VM down and says why
    scenario = {"distributions": [{"name": "Ubuntu", "memory_mib": 1024, "held_after_stop": True}, {"name": "Debian"}]}
    predicted = walk(build(tmp_path / "check", **scenario), check_mode=True)
    node = build(tmp_path / "real", **scenario)
    done = walk(node)
    assert stops(node.root) == [["--terminate", "Ubuntu"], ["--shutdown"]]
    assert [line for line in plan_lines(done) if "still holds GPU memory after the terminate" in line]
    assert [line for line in plan_lines(predicted) if line.startswith("would run")] == ["would run: C:\\Program Files\\WSL\\wsl.exe --terminate Ubuntu"]
    assert done["status"] == "fixed" and running(node.root) == []


def test_a_vm_holding_memory_no_distribution_holds_is_shut_down(tmp_path):
    node = build(tmp_path, distributions=[{"name": "Ubuntu", "memory_mib": 1024, "held_after_stop": True}, {"name": "Debian"}])
    _wsl_shutdown.stop(node, "Ubuntu", check_mode=False)  # the VM keeps Ubuntu's memory; Debian runs and holds nothing
    snapshot = _node_snapshot.take(node)
    decided = wsl_plan(snapshot)
    assert decided["terminate"] == [] and decided["shutdown"] and "no running distribution's process holds" in decided["reason"]
    predicted = _wsl_shutdown.stop(node, None, True, gpu_holders=True)
    done = _wsl_shutdown.stop(node, None, False, gpu_holders=True)
    assert predicted["commands"] == done["commands"] == [[_wsl_cli.STORE_WSL_PATH, "--shutdown"]]
    assert predicted["stopped"] == done["stopped"] == ["Debian"] and not done.get("failed")
    assert done["vms_after"] == [] and not [h for h in _node_snapshot.take(node)["holders"] if h["wsl_vm"]]


# ---- whose VM: another user's, an unknown owner, a protected user -----------------------------------------------------

@pytest.mark.parametrize("check_mode", [True, False])
def test_another_user_s_wsl_vm_is_never_ours_to_stop(tmp_path, check_mode):
    node = build(tmp_path, distributions=[{"name": "Ubuntu", "memory_mib": 0}, {"name": "Debian", "owner": "bob", "memory_mib": 2048}])
    outcome = walk(node, check_mode=check_mode)
    assert stops(node.root) == [] and running(node.root) == ["Ubuntu"] and running(node.root, "bob") == ["Debian"]
    assert [line for line in plan_lines(outcome) if "is WS12\\bob's WSL VM: wsl.exe as ada cannot stop it" in line]
    # ada's distributions are not even asked: the VM that holds the GPU is not hers
    assert not [argv for argv in commands(node.root) if "--distribution" in argv]


def test_run_as_its_user_the_wsl_rung_stops_that_user_s_holder(tmp_path):
    node = build(tmp_path, user="bob", distributions=[{"name": "Ubuntu", "memory_mib": 0}, {"name": "Debian", "owner": "bob", "memory_mib": 2048}])
    assert walk(node)["status"] == "fixed"
    assert stops(node.root) == [["--terminate", "Debian"]] and running(node.root) == ["Ubuntu"]


def test_a_wsl_vm_whose_owner_is_not_known_is_never_shut_down(tmp_path):
    # no WSL process names the VM (mirrored networking, no relay): ada's holding distribution (a fact of hers) is
    # terminated; an unattributable one is left, and the VM is never shut down
    node = build(tmp_path, wsl_relay=False, distributions=[{"name": "Ubuntu", "memory_mib": 1024},
                                                           {"name": "Alpine", "memory_mib": 512, "gpu_probe": False}])
    outcome = walk(node)
    assert stops(node.root) == [["--terminate", "Ubuntu"]] and running(node.root) == ["Alpine"]
    assert [line for line in plan_lines(outcome) if "whose WSL VM it is is not known" in line]


# ---- rule 3: judged by facts; a host without WSL is skipped -----------------------------------------------------------

def verbose_capture_scenario(captures, name):
    """The distributions of a published `wsl -l -v` capture (its STATE column is English in every language), each
    one holding GPU memory except Docker's."""
    rows = captures.text("windows", "wsl", name).splitlines()[1:]
    found = []
    for row in rows:
        cells = row.lstrip("* ").split()
        found.append({"name": cells[0], "running": cells[1] == "Running", "version": int(cells[2]),
                      "memory_mib": 0 if cells[0].startswith("docker") else 1024})
    return found


@pytest.mark.parametrize("capture, idle", [("list-verbose-mixed-v1-v2.txt", ["docker-desktop"]),
                                           ("list-verbose-docker-desktop-misaligned-paste.txt", ["docker-desktop", "docker-desktop-data"])])
@pytest.mark.parametrize("bom", [True, False])
def test_the_real_host_path_terminates_the_capture_s_holder_and_reads_the_result_from_the_list(tmp_path, captures, bom, capture, idle):
    scenario = verbose_capture_scenario(captures, capture)
    assert [d["name"] for d in scenario if d["running"]] == ["Ubuntu"] + idle
    root = build(tmp_path, distributions=scenario).root
    predicted = _wsl_shutdown.stop(target(root, bom=bom), None, True, gpu_holders=True)
    done = _wsl_shutdown.stop(target(root, bom=bom), None, False, gpu_holders=True)
    for key in ("changed", "stopped", "commands", "running_after"):
        assert predicted[key] == done[key], key
    assert done["stopped"] == ["Ubuntu"] and done["running_after"] == idle and not done.get("failed")
    assert done["commands"] == [[_wsl_cli.STORE_WSL_PATH, "--terminate", "Ubuntu"]]
    assert running(root) == idle
    again = _wsl_shutdown.stop(target(root, bom=bom), None, False, gpu_holders=True)
    assert not again["changed"] and again["commands"] == []


@pytest.mark.parametrize("lie", ["failed", "did_nothing"])
@pytest.mark.parametrize("distribution", ["Ubuntu", None])
def test_wsl_exe_s_exit_status_never_decides_what_happened(tmp_path, lie, distribution):
    root = build(tmp_path, distributions=[{"name": "Ubuntu", "memory_mib": 1024}]).root
    vm_before = [p for p in _simulated_node.snapshot_of_state(root)["processes"] if p.get("wsl_vm_of")]
    done = _wsl_shutdown.stop(target(root, lie=lie), distribution, False)
    if lie == "failed":
        # it stopped (the list and the process list say so) though wsl.exe exited -1: no failure; the words are reported
        assert not done.get("failed") and done["running_after"] == [] and running(root) == []
        assert [line for line in done["journal"] if line["phase"] == "outcome" and line["ok"] and line["rc"] == -1]
    else:
        # exit 0 and nothing happened: a failure, naming what still runs
        assert done["failed"] and "still" in done["msg"] and running(root) == ["Ubuntu"]
        if distribution is None:
            assert "WSL VM pid %d still runs" % vm_before[0]["pid"] in done["msg"]


@pytest.mark.parametrize("wsl, how", [("absent", "could not be run"), ("not_installed", "--status exited -2147024482")])
@pytest.mark.parametrize("check_mode", [True, False])
def test_a_host_without_wsl_is_skipped_saying_why(tmp_path, wsl, how, check_mode):
    node = build(tmp_path, wsl=wsl)
    for gpu_holders in (False, True):
        done = _wsl_shutdown.stop(node, None, check_mode, gpu_holders=gpu_holders)
        assert done["skipped"] and not done["changed"] and not done.get("failed")
        assert done["skip_reason"].startswith("WSL is not installed on the host") and how in done["skip_reason"]
    assert stops(node.root) == []


def test_the_walk_goes_on_past_a_wsl_rung_skipped_on_a_host_without_wsl(tmp_path):
    # a VM the snapshot takes for WSL's holds the GPU, but wsl.exe says WSL is not installed: the rung is skipped with
    # its reason, not failed, and the walk climbs to the adapter restart
    node = build(tmp_path, wsl="not_installed", distributions=[{"name": "Ubuntu", "memory_mib": 2048}])
    outcome = walk(node, max_rung="restart_adapter")
    wsl_step = [r for r in outcome["rungs_tried"] if r["rung"] in ("wsl", "restart_adapter")]
    assert wsl_step and not [r for r in wsl_step if r["rung"] == "wsl" and r["failed"]]
    assert [r for r in outcome["rungs_tried"] if r["rung"] == "restart_adapter"]
    assert "WSL is not installed on the host" in json.dumps(outcome["rungs_tried"])
    assert stops(node.root) == []


@pytest.mark.parametrize("sentence", [
    "Das Windows-Subsystem für Linux ist nicht aktiviert.\nFehlercode: Wsl/WSL_E_WSL_OPTIONAL_COMPONENT_REQUIRED\n",
    "适用于 Linux 的 Windows 子系统可选组件未启用。\n错误代码: Wsl/WSL_E_WSL_OPTIONAL_COMPONENT_REQUIRED\n",
])
@pytest.mark.parametrize("bom", [True, False])
def test_a_newer_wsl_without_its_component_is_known_by_the_error_code_in_any_language(sentence, bom):
    raw = (codecs.BOM_UTF16_LE if bom else b"") + sentence.replace("\n", "\r\n").encode("utf-16-le")
    text = _output_encoding.decode_transported(_simulated_node.transported(raw), unicode_only=True).text  # as TargetNode reads wsl.exe
    assert _wsl_cli.not_installed(-1, text) and _wsl_cli.not_installed(0xFFFFFFFF, text)
    assert not _wsl_cli.not_installed(0, text)
    assert not _wsl_cli.not_installed(-1, text.replace("WSL_E_WSL_OPTIONAL_COMPONENT_REQUIRED", "WSL_E_DEFAULT_DISTRO_NOT_FOUND"))


def test_a_terminate_the_facts_say_failed_ends_the_run_before_any_shutdown(tmp_path):
    root = build(tmp_path, distributions=[{"name": "Ubuntu", "memory_mib": 1024}, {"name": "Alpine", "memory_mib": 512, "gpu_probe": False}]).root
    predicted = _wsl_shutdown.stop(target(root), None, True, gpu_holders=True)
    assert [argv[1] for argv in predicted["commands"]] == ["--terminate", "--shutdown"]
    done = _wsl_shutdown.stop(target(root, lie="did_nothing"), None, False, gpu_holders=True)
    assert done["failed"] and done["msg"].startswith("C:\\Program Files\\WSL\\wsl.exe --terminate Ubuntu did not stop Ubuntu")
    assert [(line["action"], line["phase"]) for line in done["journal"]] == [("wsl_terminate", "intent"), ("wsl_terminate", "outcome")]
    assert running(root) == ["Ubuntu", "Alpine"]


def test_unreadable_facts_after_a_terminate_are_a_failure_with_its_outcome_journaled(tmp_path):
    root = build(tmp_path, distributions=[{"name": "Ubuntu", "memory_mib": 1024}, {"name": "Debian"}]).root

    class Blind(SimulatedHost):
        calls = 0

        def _execute_module(self, module_name, module_args, task_vars):
            argv = module_args.get("argv") or []
            if "--running" in argv:
                Blind.calls += 1
                if Blind.calls > 1:  # after the terminate, the list answers garbage
                    return {"rc": 0, "stdout": "\u00ff\u00fe not names ; --", "stderr": ""}
            return SimulatedHost._execute_module(self, module_name, module_args, task_vars)
    done = _wsl_shutdown.stop(_remote_node.TargetNode(Blind(root), {}, "ada"), "Ubuntu", False)
    assert done["failed"] and "what it did is not known" in done["msg"]
    outcome = [line for line in done["journal"] if line["phase"] == "outcome"]
    assert len(outcome) == 1 and outcome[0]["ok"] is False and outcome[0]["rc"] == 0


def test_a_plan_without_a_readable_list_attributes_nothing():
    snapshot = {"holders": [{"pid": 7, "name": "vmmemWSL", "gpus": [0], "class": "wsl_vm", "wsl_mine": True, "used_mib": 900}],
                "wsl": {"user": "ada", "status": "unrecognised", "message": "wsl.exe exited 5", "running": [], "distributions": []}}
    decided = wsl_plan(snapshot)
    assert decided["terminate"] == [] and decided["shutdown"]
    assert "wsl --list --running could not be read: wsl.exe exited 5" in decided["reason"]


@pytest.mark.parametrize("wsl_relay", [True, False])
def test_the_words_nothing_runs_mean_it_only_while_the_user_s_own_vm_is_known_not_to_run(tmp_path, wsl_relay):
    # ada's list says nothing runs (exit -1, words); bob's WSL VM runs: with its owner known it is not hers, and the
    # words' exit is read as nothing running; without, nothing is concluded and nothing is stopped
    root = build(tmp_path, wsl_relay=wsl_relay, distributions=[{"name": "Debian", "owner": "bob", "memory_mib": 512}]).root
    node = target(root, sentence="Es werden keine Distributionen ausgeführt.\n", bom=True)
    if wsl_relay:
        done = _wsl_shutdown.stop(node, None, False)
        assert not done["changed"] and done["running_before"] == []
    else:
        with pytest.raises(_remote_node.WindowsNodeError, match="not readable"):
            _wsl_shutdown.stop(node, None, False)
    assert running(root, "bob") == ["Debian"] and stops(root) == []


def test_no_running_distribution_in_every_language_with_a_wsl_vm_of_another_user_is_read_as_none(tmp_path, captures):
    # bob's VM runs; ada's list says (in any language) that nothing runs: her VM is not running, so nothing runs
    sentences = captures.text("windows", "wsl", "no-running-distributions-message-by-locale-resw.tsv").splitlines()[1:]
    root = build(tmp_path, distributions=[{"name": "Debian", "owner": "bob", "memory_mib": 512}]).root
    for line in sentences:
        locale, sentence = line.split("\t")
        for bom in (True, False):
            done = _wsl_shutdown.stop(target(root, sentence=sentence + "\n", bom=bom), None, False)
            assert not done["changed"] and done["running_before"] == [] and not done.get("failed"), locale
    assert running(root, "bob") == ["Debian"]


# ---- the modules' documentation says what their argument specs take ---------------------------------------------------

def documented(module):
    import importlib
    import yaml
    return yaml.safe_load(importlib.import_module("ansible_collections.gpuops.remediation.plugins.modules." + module).DOCUMENTATION)["options"]


def same_options(spec, docs, where):
    assert sorted(spec) == sorted(docs), where
    for name, option in spec.items():
        doc = docs[name]
        for key in ("type", "default", "choices", "required", "elements"):
            assert option.get(key) == doc.get(key), "%s.%s: %s %r in the spec, %r in the docs" % (where, name, key, option.get(key), doc.get(key))
        if "options" in option:
            same_options(option["options"], doc["suboptions"], "%s.%s" % (where, name))


def test_wsl_shutdown_documents_its_argument_spec():
    spec = dict((name, option) for name, option in _wsl_shutdown.ARGUMENT_SPEC.items() if name not in ("journal_path", "run_id"))
    same_options(spec, documented("wsl_shutdown"), "wsl_shutdown")


def test_win_gpu_sim_documents_its_wsl_options():
    from ansible_collections.gpuops.remediation.plugins.action import win_gpu_sim
    docs = documented("win_gpu_sim")
    for name in ("wsl", "wsl_vm_name", "wsl_relay", "distributions"):
        same_options({name: win_gpu_sim.ARGUMENT_SPEC[name]}, {name: docs[name]}, "win_gpu_sim")
