# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The simulated nvidia-smi, modprobe, lsmod and systemctl, run as the executables gpu_sim writes,
compared with the real captures in fixtures."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
import xml.etree.ElementTree as ET

import pytest

from ansible_collections.gpuops.remediation.plugins.module_utils.probes import _process
from ansible_collections.gpuops.remediation.plugins.module_utils.simulation import _sim_build as sim
from ansible_collections.gpuops.remediation.plugins.module_utils.simulation._sim_processes import SERVICES
from ansible_collections.gpuops.remediation.plugins.module_utils.simulation import _sim_state as sim_state
from ansible_collections.gpuops.remediation.tests.unit.helpers import bounded, sim_kinds

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures")


def fixture_text(*parts):
    with open(os.path.join(FIXTURES, *parts)) as handle:
        return handle.read()


def run(root, tool, *args):
    return subprocess.run([os.path.join(root, "bin", tool)] + list(args), capture_output=True, text=True, timeout=30,
                          check=False)


def holder_named(state, name):
    return next(h for h in state["holders"] if h["name"] == name)


def wait_gone(pid, start_time, timeout=bounded.DEADLINE):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and sim_state.process_exists(pid, start_time):
        time.sleep(0.02)
    return not sim_state.process_exists(pid, start_time)


def element_paths(tree):
    paths = set()

    def walk(element, prefix):
        path = prefix + "/" + element.tag
        paths.add(path)
        for child in element:
            walk(child, path)

    walk(tree.getroot(), "")
    return paths


def test_query_xml_has_the_v13_shape_and_the_node_values(node_root, tmp_path):
    state = sim.create_node(node_root, {"gpus": [{"ghost_mib": 4096}, {}],
                                        "holders": [{"gpus": [0], "memory_mib": 2048, "name": "x; touch /tmp/pwned #\n<b>"}]})
    result = run(node_root, "nvidia-smi", "-q", "-x")
    assert result.returncode == 0, result.stderr
    real = fixture_text("nvidia-smi-qx", "v13-rtx4000-sff-ada-595.84.xml")
    assert result.stdout.splitlines()[:3] == real.splitlines()[:3]  # declaration, v13 DOCTYPE, root element
    ours = ET.ElementTree(ET.fromstring(result.stdout))
    # Every element we print exists at the same place in the real v13 capture.
    assert element_paths(ours) - element_paths(ET.ElementTree(ET.fromstring(real))) == set()
    gpus = ours.findall("gpu")
    assert [gpu.get("id") for gpu in gpus] == ["00000000:18:00.0", "00000000:2A:00.0"]
    assert ours.findtext("attached_gpus") == "2"
    assert gpus[0].findtext("fb_memory_usage/used") == "6144 MiB"
    assert gpus[0].findtext("fb_memory_usage/reserved") == "552 MiB"
    process = gpus[0].find("processes/process_info")
    trainer = holder_named(state, "x; touch /tmp/pwned #\n<b>")
    assert process.findtext("pid") == str(trainer["pid"])
    assert process.findtext("process_name") == "x; touch /tmp/pwned #\n<b>"
    assert process.findtext("used_memory") == "2048 MiB"
    assert gpus[1].find("processes/process_info") is None


def shape_of(field, value):
    if field in ("uuid", "pci.bus_id"):
        return re.sub(r"[0-9A-Fa-f]", "x", value)
    return re.sub(r"\d+", "N", value)


def test_query_gpu_csv_matches_the_real_header_and_value_format(node_root):
    sim.create_node(node_root, {"gpus": [{"name": "NVIDIA H200", "memory_mib": 143771, "reserved_mib": 618,
                                          "persistence_mode": True, "mig_mode": False}]})
    fields = ["name", "uuid", "pci.bus_id", "index", "persistence_mode", "memory.total", "memory.reserved", "memory.used",
              "memory.free", "compute_mode", "gpu_recovery_action", "mig.mode.current"]
    real_lines = fixture_text("nvidia-smi-query-gpu", "linux-h200-590.48.01-load.csv").splitlines()
    real_header = real_lines[0].split(", ")
    real_row = real_lines[1].split(", ")
    real_names = [column.split(" [")[0] for column in real_header]
    result = run(node_root, "nvidia-smi", "--query-gpu=" + ",".join(fields), "--format=csv")
    assert result.returncode == 0
    header, row = result.stdout.splitlines()
    assert header.split(", ") == [real_header[real_names.index(field)] for field in fields]
    values = row.split(", ")
    # The same shape as the capture, field by field: 'NNN MiB', the same words for the modes.
    assert [shape_of(f, v) for f, v in zip(fields, values)] == [shape_of(f, real_row[real_names.index(f)]) for f in fields]
    assert values[5:9] == ["143771 MiB", "618 MiB", "0 MiB", "143153 MiB"]
    bare = run(node_root, "nvidia-smi", "--query-gpu=memory.used,memory.total", "--format=csv,noheader,nounits")
    assert bare.stdout == "0, 143771\n"
    unknown = run(node_root, "nvidia-smi", "--query-gpu=no.such.field", "--format=csv")
    assert unknown.returncode == 2 and 'Field "no.such.field" is not a valid field to query.' in unknown.stdout


def test_compute_apps_csv_matches_the_real_capture(node_root):
    state = sim.create_node(node_root, {"holders": [{"gpus": [0], "memory_mib": 2296, "name": "/root/tools/memhog"},
                                                    {"gpus": [0], "memory_mib": 64, "name": "Xwayland", "type": "G"}]})
    real = fixture_text("nvidia-smi-query-compute-apps", "linux-h100-mig-590.48.01-load.csv").splitlines()
    fields = "timestamp,gpu_name,gpu_bus_id,gpu_serial,gpu_uuid,pid,process_name,used_gpu_memory"
    result = run(node_root, "nvidia-smi", "--query-compute-apps=" + fields, "--format=csv")
    lines = result.stdout.splitlines()
    assert lines[0] == real[0]
    assert len(lines) == 2  # the graphics process is not a compute app
    shape = re.compile(r"^\d{4}/\d\d/\d\d \d\d:\d\d:\d\d\.\d{3}, [^,]+, [0-9A-F]{8}:[0-9A-F]{2}:[0-9A-F]{2}\.\d, \w+, GPU-[0-9a-f-]+, "
                       r"\d+, [^,]+, \d+ MiB$")
    assert shape.match(real[1]) and shape.match(lines[1])
    memhog = holder_named(state, "/root/tools/memhog")
    assert lines[1].endswith(", %d, /root/tools/memhog, 2296 MiB" % memhog["pid"])
    os.kill(memhog["pid"], signal.SIGKILL)
    assert wait_gone(memhog["pid"], memhog["start_time"])
    assert run(node_root, "nvidia-smi", "--query-compute-apps=" + fields, "--format=csv").stdout.splitlines() == [real[0]]


def test_list_gpus_has_the_real_shape(node_root):
    sim.create_node(node_root, {"gpus": [{"name": "NVIDIA H200"}, {"name": "NVIDIA H200"}]})
    real = fixture_text("nvidia-smi-L", "linux-h200-mig-590.48.01.txt").splitlines()[0]
    shape = re.compile(r"^GPU (\d+): (.+) \(UUID: (GPU-[0-9a-f-]{36})\)$")
    assert shape.match(real)
    lines = run(node_root, "nvidia-smi", "-L").stdout.splitlines()
    assert [shape.match(line).group(1, 2) for line in lines] == [("0", "NVIDIA H200"), ("1", "NVIDIA H200")]


def test_gpu_reset_fails_with_the_real_text_while_held_then_succeeds(node_root):
    state = sim.create_node(node_root, {"gpus": [{"ghost_mib": 4096, "recovery_action": "reset"}, {}],
                                        "holders": [{"gpus": [0], "memory_mib": 1024, "name": "trainer"}]})
    refused = run(node_root, "nvidia-smi", "--gpu-reset", "-i", "0")
    assert refused.returncode == 255
    singular = fixture_text("nvidia-smi-gpu-reset", "fail-in-use-by-another-process-fabric-manager-wording.txt").splitlines()
    assert refused.stdout.splitlines() == ["The following GPUs could not be reset:", "  GPU 00000000:18:00.0: In use by another client",
                                           "", singular[2]]
    # GPU 1 is not held: a CUDA process on GPU 0 does not block it.
    other = run(node_root, "nvidia-smi", "--gpu-reset", "-i", "00000000:2A:00.0")
    assert other.returncode == 0 and other.stdout == "GPU 00000000:2A:00.0 was successfully reset.\nAll done.\n"

    trainer = holder_named(state, "trainer")
    os.kill(trainer["pid"], signal.SIGKILL)
    assert wait_gone(trainer["pid"], trainer["start_time"])
    assert sim_state.gpu_memory(sim_state.load_state(node_root), 0)["used_mib"] == 4096  # the ghost stays after the kill
    done = run(node_root, "nvidia-smi", "--gpu-reset", "-i", state["gpus"][0]["uuid"])
    assert done.returncode == 0
    assert done.stdout.splitlines()[-1] == fixture_text("nvidia-smi-gpu-reset", "success-single-gpu.txt").splitlines()[-1]
    assert re.match(r"^GPU [0-9A-F]{8}:[0-9A-F]{2}:[0-9A-F]{2}\.\d was successfully reset\.$", done.stdout.splitlines()[0])
    after = sim_state.load_state(node_root)
    assert sim_state.gpu_memory(after, 0)["used_mib"] == 0 and after["gpus"][0]["recovery_action"] == "none"


def test_gpu_reset_plural_failure_and_blocking_daemons(node_root):
    sim.create_node(node_root, {"gpus": [{}, {}, {}, {}], "services": ["nvidia-fabricmanager"]})
    refused = run(node_root, "nvidia-smi", "--gpu-reset")
    real = fixture_text("nvidia-smi-gpu-reset", "fail-4gpus-in-use-by-another-client-mig-parted.txt").splitlines()
    ours = refused.stdout.splitlines()
    assert refused.returncode == 255
    assert ours[0] == real[0] and ours[5:] == real[5:]  # header, blank line, the plural explanation
    assert all(re.match(r"^  GPU [0-9A-F:.]+: In use by another client$", line) for line in ours[1:5])
    assert run(node_root, "systemctl", "stop", "nvidia-fabricmanager").returncode == 0
    assert run(node_root, "nvidia-smi", "--gpu-reset").stdout.endswith("All done.\n")


def test_a_client_of_nvidiactl_alone_blocks_the_reset_of_every_gpu(node_root):
    state = sim.create_node(node_root, {"gpus": [{}, {}], "holders": [{"gpus": [], "memory_mib": 0, "name": "nvml-monitor"}]})
    monitor = holder_named(state, "nvml-monitor")
    fds = os.listdir("/proc/%d/fd" % monitor["pid"])
    held = set(os.readlink("/proc/%d/fd/%s" % (monitor["pid"], fd)) for fd in fds) & set(
        os.path.join(node_root, "dev", name) for name in os.listdir(os.path.join(node_root, "dev")))
    assert held == {os.path.join(node_root, "dev", "nvidiactl")}
    refused = run(node_root, "nvidia-smi", "--gpu-reset", "-i", "1")
    assert refused.returncode == 255
    assert refused.stdout.splitlines()[:2] == ["The following GPUs could not be reset:",
                                               "  GPU 00000000:2A:00.0: In use by another client"]
    os.kill(monitor["pid"], signal.SIGKILL)
    assert wait_gone(monitor["pid"], monitor["start_time"])
    assert run(node_root, "nvidia-smi", "--gpu-reset", "-i", "0,1").returncode == 0


def test_gpu_reset_of_peers_primary_and_lost(node_root):
    sim.create_node(node_root, {"gpus": [{"nvlink_peers": [1]}, {"nvlink_peers": [0]}, {"primary": True}, {"lost": True}],
                                "reset_requires_nvlink_peers": True})
    alone = run(node_root, "nvidia-smi", "--gpu-reset", "-i", "0")
    assert alone.returncode == 255 and "NVLink peers must be reset together" in alone.stdout
    assert run(node_root, "nvidia-smi", "--gpu-reset", "-i", "0,1").returncode == 0
    primary = run(node_root, "nvidia-smi", "--gpu-reset", "-i", "2")
    real_primary = fixture_text("nvidia-smi-gpu-reset", "fail-primary-gpu.txt").splitlines()[1]
    assert primary.stdout.strip() == real_primary.replace("00000000:01:00.0", "00000000:3A:00.0")
    lost = run(node_root, "nvidia-smi", "--gpu-reset", "-i", "3")
    assert lost.returncode == 15 and lost.stdout == "Unable to determine the device handle for GPU0000:5D:00.0: Unknown Error\n"
    query = run(node_root, "nvidia-smi", "-q", "-x")
    assert query.returncode == 15 and "GPU0000:5D:00.0: Unknown Error" in query.stderr
    listed = [gpu.get("id") for gpu in ET.fromstring(query.stdout).findall("gpu")]
    assert listed == ["00000000:18:00.0", "00000000:2A:00.0", "00000000:3A:00.0"]


def test_lsmod_has_the_real_column_layout(node_root):
    sim.create_node(node_root, {"services": ["display-manager"], "holders": [{"gpus": [0], "name": "trainer"}]})
    real = fixture_text("lsmod", "ubuntu-2010-drm-i915-hybrid.txt").splitlines()
    for line in real:
        name, size, count = line.split()[:3]
        users = line.split()[3:]
        assert "%-19s %8d  %d" % (name, int(size), int(count)) + (" " + users[0] if users else "") == line
    result = run(node_root, "lsmod")
    lines = result.stdout.splitlines()
    assert lines[0] == "Module                  Size  Used by"
    table = dict((line.split()[0], line.split()[1:]) for line in lines[1:])
    assert sorted(table) == ["nvidia", "nvidia_drm", "nvidia_modeset", "nvidia_uvm"]
    assert table["nvidia_modeset"][2:] == ["nvidia_drm"]
    assert sorted(table["nvidia"][2].split(",")) == ["nvidia_modeset", "nvidia_uvm"]
    # nvidia: 2 dependent modules + gdm3, Xorg and the trainer holding device files.
    assert table["nvidia"][1] == "5"
    for line in lines[1:]:
        name, size, count = line.split()[:3]
        assert line.startswith("%-19s %8d  %d" % (name, int(size), int(count)))


def test_modprobe_refuses_while_held_then_reloads_and_clears_ghost_memory(node_root):
    state = sim.create_node(node_root, {"gpus": [{"ghost_mib": 3072}], "holders": [{"gpus": [0], "name": "render-job"}],
                                        "services": ["nvidia-persistenced", "display-manager"]})
    refused = run(node_root, "modprobe", "-r", "nvidia")
    assert refused.returncode == 1
    assert refused.stderr == fixture_text("modprobe", "modprobe-r-nvidia-fatal-in-use.txt")
    chain = run(node_root, "modprobe", "-r", "nvidia_drm", "nvidia_modeset", "nvidia_uvm", "nvidia")
    assert chain.returncode == 1
    assert chain.stderr.splitlines() == ["modprobe: FATAL: Module %s is in use." % name
                                         for name in ("nvidia_drm", "nvidia_modeset", "nvidia_uvm", "nvidia")]

    job = holder_named(state, "render-job")
    os.kill(job["pid"], signal.SIGKILL)
    assert wait_gone(job["pid"], job["start_time"])
    assert run(node_root, "systemctl", "isolate", "multi-user.target").returncode == 0
    assert run(node_root, "systemctl", "stop", "nvidia-persistenced").returncode == 0
    unloaded = run(node_root, "modprobe", "-r", "nvidia-drm", "nvidia_uvm")
    assert (unloaded.returncode, unloaded.stderr) == (0, "")
    assert run(node_root, "lsmod").stdout == "Module                  Size  Used by\n"  # unused dependencies went too
    assert not os.path.exists(os.path.join(node_root, "sys", "module", "nvidia"))
    assert run(node_root, "nvidia-smi", "-L").returncode == 9

    loaded = run(node_root, "modprobe", "nvidia_drm", "modeset=1")
    assert loaded.returncode == 0
    modules = [line.split()[0] for line in run(node_root, "lsmod").stdout.splitlines()[1:]]
    assert sorted(modules) == ["nvidia", "nvidia_drm", "nvidia_modeset"]
    with open(os.path.join(node_root, "sys", "module", "nvidia_drm", "parameters", "modeset")) as handle:
        assert handle.read() == "Y\n"
    assert sim_state.gpu_memory(sim_state.load_state(node_root), 0)["used_mib"] == 0
    missing = run(node_root, "modprobe", "nvidia_nonesuch")
    assert missing.returncode == 1 and missing.stderr.startswith("modprobe: FATAL: Module nvidia_nonesuch not found in directory")


def test_a_user_of_nvidia_outside_the_driver_keeps_it_loaded(node_root):
    sim.create_node(node_root, {"modules": ["nvidia", "nvidia_uvm", "gdrdrv"]})
    with open(os.path.join(node_root, "proc", "modules")) as handle:
        table = dict((line.split()[0], line.split()[3]) for line in handle)
    assert table == {"gdrdrv": "-", "nvidia_uvm": "-", "nvidia": "gdrdrv,nvidia_uvm,"}
    refused = run(node_root, "modprobe", "-r", "nvidia_uvm", "nvidia")
    assert refused.returncode == 1
    assert refused.stderr == fixture_text("modprobe", "modprobe-r-nvidia-fatal-in-use.txt")
    assert run(node_root, "modprobe", "-r", "gdrdrv").returncode == 0
    assert run(node_root, "modprobe", "-r", "nvidia").returncode == 0
    assert run(node_root, "lsmod").stdout == "Module                  Size  Used by\n"
    assert run(node_root, "modprobe", "gdrdrv").returncode == 0  # loads nvidia first, as its dependency
    assert sorted(line.split()[0] for line in run(node_root, "lsmod").stdout.splitlines()[1:]) == ["gdrdrv", "nvidia"]


def test_pinned_module_stays_in_use(node_root):
    sim.create_node(node_root, {"modules": ["nvidia"], "pinned_modules": ["nvidia"]})
    refused = run(node_root, "modprobe", "-r", "nvidia")
    assert refused.returncode == 1 and refused.stderr == "modprobe: FATAL: Module nvidia is in use.\n"


def test_systemctl_runs_real_service_processes(node_root):
    state = sim.create_node(node_root, {"services": ["nvidia-persistenced", "display-manager"]})
    assert run(node_root, "systemctl", "get-default").stdout == "graphical.target\n"
    persistenced = state["services"]["nvidia-persistenced"]
    with open("/proc/%d/comm" % persistenced["pid"]) as handle:
        assert handle.read() == "nvidia-persiste\n"
    assert run(node_root, "systemctl", "show", "-p", "MainPID", "--value", "nvidia-persistenced").stdout == "%d\n" % persistenced["pid"]
    active = run(node_root, "systemctl", "is-active", "nvidia-persistenced.service")
    assert (active.returncode, active.stdout) == (0, "active\n")
    running = run(node_root, "systemctl", "list-units", "--type=service", "--state=running", "--no-legend", "--plain")
    assert [line.split()[:4] for line in running.stdout.splitlines()] == [
        ["gdm.service", "loaded", "active", "running"], ["nvidia-persistenced.service", "loaded", "active", "running"]]

    assert run(node_root, "systemctl", "stop", "nvidia-persistenced").returncode == 0
    assert wait_gone(persistenced["pid"], persistenced["start_time"])
    inactive = run(node_root, "systemctl", "is-active", "nvidia-persistenced")
    assert (inactive.returncode, inactive.stdout) == (3, "inactive\n")
    assert run(node_root, "systemctl", "show", "-p", "MainPID", "--value", "nvidia-persistenced").stdout == "0\n"
    assert run(node_root, "systemctl", "start", "nvidia-persistenced").returncode == 0
    new_pid = int(run(node_root, "systemctl", "show", "-p", "MainPID", "--value", "nvidia-persistenced").stdout)
    assert new_pid not in (0, persistenced["pid"]) and os.path.exists("/proc/%d" % new_pid)

    display = sim_state.load_state(node_root)["services"]["display-manager"]
    xorg = display["children"][0]
    assert xorg["name"] == "Xorg"
    assert run(node_root, "systemctl", "isolate", "multi-user.target").returncode == 0
    assert wait_gone(display["pid"], display["start_time"]) and wait_gone(xorg["pid"], xorg["start_time"])
    assert run(node_root, "systemctl", "is-active", "display-manager").returncode == 3
    assert run(node_root, "systemctl", "isolate", "graphical.target").returncode == 0
    assert run(node_root, "systemctl", "is-active", "display-manager").stdout == "active\n"
    unknown = run(node_root, "systemctl", "stop", "nonesuch")
    assert unknown.returncode == 5 and unknown.stderr == "Failed to stop nonesuch.service: Unit nonesuch.service not found.\n"


def test_kernel_log_xid_lines_look_like_the_driver_s(node_root):
    sim.create_node(node_root, {"gpus": [{}, {"pci_bus_id": "0000:9b:00.0"}], "kernel_log": ["NVRM: loading NVIDIA UNIX driver"],
                                "xid": [{"xid": 79, "gpu": 1}, {"xid": 43, "gpu": 0, "pid": 1045242, "process_name": "pt_main_thread"}]})
    with open(os.path.join(node_root, "kernel.log")) as handle:
        lines = handle.read().splitlines()
    assert lines[0] == "NVRM: loading NVIDIA UNIX driver"
    real = [line for line in fixture_text("kernel-xid", "xid43-31-94-multi-gpu-dmesg-T.log").splitlines() if "Xid" in line][0]
    shape = re.compile(r"NVRM: Xid \(PCI:[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\): (\d+), pid=([^,]+), name=([^,]+), (.*)$")
    assert shape.search(real)
    assert shape.search(lines[1]).groups() == ("79", "'<unknown>'", "<unknown>", "GPU has fallen off the bus.")
    assert "(PCI:0000:9b:00): 79" in lines[1]
    assert shape.search(lines[2]).groups()[:3] == ("43", "1045242", "pt_main_thread")
    assert re.match(r"^\[ *\d+\.\d{6}\] NVRM", lines[1])


def test_driver_not_loaded_and_hung_nvidia_smi(tmp_path):
    unloaded, hung = str(tmp_path / "unloaded"), str(tmp_path / "hung")
    try:
        sim.create_node(unloaded, {"modules": []})
        result = run(unloaded, "nvidia-smi")
        assert result.returncode == 9 and result.stdout.startswith("NVIDIA-SMI has failed because it couldn't communicate")
        sim.create_node(hung, {"nvml_hang": True})
        with pytest.raises(subprocess.TimeoutExpired):
            subprocess.run([os.path.join(hung, "bin", "nvidia-smi"), "-L"], capture_output=True, timeout=1.5, check=False)
    finally:
        sim.destroy_node(unloaded)
        sim.destroy_node(hung)


def test_destroy_kills_every_process_and_removes_the_root(node_root):
    _destroy_kills_every_process_and_removes_the_root(node_root, sim_kinds.startable_holder_kinds(), sorted(SERVICES), 2)


@pytest.mark.parametrize("kind", sorted(sim_kinds.UNSHARING_KINDS))
def test_destroy_kills_a_holder_kind_that_unshares(node_root, kind):
    bounded.require_unshare(sim_kinds.UNSHARING_KINDS[kind])
    _destroy_kills_every_process_and_removes_the_root(node_root, [kind], [], 1)


def _destroy_kills_every_process_and_removes_the_root(node_root, kinds, services, helpers):
    """helpers: the processes beyond one per holder and service (the supervisor, a zombie's parent)."""
    state = sim.create_node(node_root, {"holders": [{"kind": kind, "gpus": [0]} for kind in kinds], "services": services})
    processes = [(p["pid"], p["start_time"]) for p in state["processes"]]
    assert len(processes) >= len(kinds) + len(services) + helpers
    assert sim.destroy_node(node_root) is True
    assert not os.path.exists(node_root)
    leftovers = [(pid, record) for pid, record in ((pid, _process.read_process(pid)) for pid, start in processes
                                                   if sim_state.process_exists(pid, start))
                 if record and record["state"] != "Z"]
    assert leftovers == []
    assert sim.destroy_node(node_root) is False
