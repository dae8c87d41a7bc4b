# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The simulated NVML, through pynvml's public functions, on nodes with real holder processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from ansible_collections.gpuops.remediation.plugins.module_utils.probes import _process
from ansible_collections.gpuops.remediation.plugins.module_utils.simulation import _sim_build as sim
from ansible_collections.gpuops.remediation.plugins.module_utils.simulation import _sim_rules as sim_rules
from ansible_collections.gpuops.remediation.plugins.module_utils.simulation import _sim_state as sim_state
from ansible_collections.gpuops.remediation.plugins.module_utils._node import NodeLayout
from ansible_collections.gpuops.remediation.tests.unit.helpers import bounded, sim_kinds

MIB = 1024 * 1024


def make_node(root, **spec):
    return sim.create_node(str(root), spec)


@pytest.fixture
def node_root(tmp_path):
    root = tmp_path / "node"
    yield root
    sim.destroy_node(str(root))


def nvml_for(root):
    pynvml = NodeLayout(str(root)).load_nvml()
    pynvml.nvmlInit()
    return pynvml


def wait_until(predicate, timeout=bounded.DEADLINE):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


def holder_named(state, name):
    return next(h for h in state["holders"] if h["name"] == name)


def test_identity_of_the_node_and_its_gpus(node_root):
    make_node(node_root, driver_version="595.71.05", cuda_version="13.2",
              gpus=[{"name": "NVIDIA H200", "pci_bus_id": "0000:9b:00.0", "uuid": "GPU-11111111-2222-3333-4444-555555555555"},
                    {"name": "NVIDIA H200"}])
    pynvml = nvml_for(node_root)
    assert pynvml.nvmlSystemGetDriverVersion() == "595.71.05"
    assert pynvml.nvmlSystemGetCudaDriverVersion() == 13020
    assert pynvml.nvmlSystemGetCudaDriverVersion_v2() == 13020
    assert pynvml.nvmlDeviceGetCount() == 2
    first = pynvml.nvmlDeviceGetHandleByIndex(0)
    assert pynvml.nvmlDeviceGetName(first) == "NVIDIA H200"
    assert pynvml.nvmlDeviceGetUUID(first) == "GPU-11111111-2222-3333-4444-555555555555"
    pci = pynvml.nvmlDeviceGetPciInfo(first)
    assert (pci.busId, pci.busIdLegacy, pci.domain, pci.bus, pci.device) == ("00000000:9B:00.0", "0000:9B:00.0", 0, 0x9B, 0)
    assert pynvml.nvmlDeviceGetMinorNumber(pynvml.nvmlDeviceGetHandleByIndex(1)) == 1
    # Any usual spelling of the bus id finds the same GPU.
    by_bus = pynvml.nvmlDeviceGetHandleByPciBusId("9b:00.0")
    assert pynvml.nvmlDeviceGetUUID(by_bus) == "GPU-11111111-2222-3333-4444-555555555555"
    with pytest.raises(pynvml.NVMLError_NotFound):
        pynvml.nvmlDeviceGetHandleByPciBusId("00000000:01:00.0")
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        pynvml.nvmlDeviceGetHandleByIndex(2)
    pynvml.nvmlShutdown()


def test_memory_follows_a_live_holder_and_is_freed_when_it_is_killed(node_root):
    state = make_node(node_root, gpus=[{"memory_mib": 81559, "reserved_mib": 552, "ghost_mib": 1000}],
                      holders=[{"kind": "fd", "gpus": [0], "memory_mib": 2048, "name": "trainer"}])
    trainer = holder_named(state, "trainer")
    assert os.path.exists("/proc/%d" % trainer["pid"])
    pynvml = nvml_for(node_root)
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)

    v2 = pynvml.nvmlDeviceGetMemoryInfo(handle, version=pynvml.nvmlMemory_v2)
    assert (v2.total, v2.reserved, v2.used) == (81559 * MIB, 552 * MIB, 3048 * MIB)
    assert v2.free == (81559 - 552 - 3048) * MIB
    v1 = pynvml.nvmlDeviceGetMemoryInfo(handle)
    assert v1.used == (552 + 3048) * MIB and v1.total == v1.used + v1.free
    procs = pynvml.nvmlDeviceGetComputeRunningProcesses(handle)
    assert [(p.pid, p.usedGpuMemory) for p in procs] == [(trainer["pid"], 2048 * MIB)]

    os.kill(trainer["pid"], signal.SIGKILL)
    assert wait_until(lambda: not sim_state.process_exists(trainer["pid"], trainer["start_time"]))
    assert pynvml.nvmlDeviceGetComputeRunningProcesses(handle) == []
    after = pynvml.nvmlDeviceGetMemoryInfo(handle, version=pynvml.nvmlMemory_v2)
    assert after.used == 1000 * MIB  # the ghost memory stays


def test_every_holder_kind_is_listed_while_its_process_exists(node_root):
    kinds = sim_kinds.startable_holder_kinds()
    state = make_node(node_root, holders=[{"kind": kind, "gpus": [0], "memory_mib": 100 + n, "name": "job-" + kind}
                                          for n, kind in enumerate(kinds)])
    pynvml = nvml_for(node_root)
    listed = dict((p.pid, p.usedGpuMemory // MIB) for p in pynvml.nvmlDeviceGetComputeRunningProcesses(pynvml.nvmlDeviceGetHandleByIndex(0)))
    # An O_PATH holder never opened a device: the driver lists it nowhere (the scan must not take it for a holder).
    expected = dict((holder_named(state, "job-" + kind)["pid"], 100 + n) for n, kind in enumerate(kinds) if kind != "o_path")
    assert listed == expected
    processes = dict((kind, _process.read_process(holder_named(state, "job-" + kind)["pid"])) for kind in kinds)
    assert processes["zombie"]["state"] == "Z"  # an exited child its parent never reaps
    assert not processes["zombie"]["leader_exited"]
    assert processes["leader_exited"]["leader_exited"]  # the leader is gone, a thread holds the files
    assert processes["fd"]["state"] in ("S", "R") and not processes["fd"]["leader_exited"]
    zombie = holder_named(state, "job-zombie")
    assert processes["zombie"]["ppid"] == zombie["parent_pid"]
    # The kernel's view: who has which device file, and how.
    users = sim_rules.device_users(str(node_root))
    gpu0 = os.path.realpath(sim_state.gpu_device(str(node_root), 0))
    for kind in ("fd", "mmap", "inherited", "ignores_term", "leader_exited"):
        assert gpu0 in users[holder_named(state, "job-" + kind)["pid"]], kind
    assert zombie["pid"] not in users and zombie["parent_pid"] not in users
    mapped = holder_named(state, "job-mmap")["pid"]
    with open("/proc/%d/maps" % mapped) as maps:
        assert gpu0 in maps.read()
    fd_dir = "/proc/%d/fd" % mapped
    assert gpu0 not in [os.readlink(os.path.join(fd_dir, fd)) for fd in os.listdir(fd_dir)]  # mapped only


@pytest.mark.parametrize("kind", sorted(sim_kinds.UNSHARING_KINDS))
def test_a_holder_kind_that_unshares_is_listed_while_its_process_exists(node_root, kind):
    bounded.require_unshare(sim_kinds.UNSHARING_KINDS[kind])
    state = make_node(node_root, holders=[{"kind": kind, "gpus": [0], "memory_mib": 100, "name": "job-" + kind}])
    pynvml = nvml_for(node_root)
    listed = dict((p.pid, p.usedGpuMemory // MIB) for p in pynvml.nvmlDeviceGetComputeRunningProcesses(pynvml.nvmlDeviceGetHandleByIndex(0)))
    assert listed == {holder_named(state, "job-" + kind)["pid"]: 100}


def test_a_zombie_is_freed_when_its_parent_dies(node_root):
    state = make_node(node_root, holders=[{"kind": "zombie", "gpus": [0], "memory_mib": 768, "name": "zombie-worker"}])
    zombie = holder_named(state, "zombie-worker")
    os.kill(zombie["pid"], signal.SIGKILL)  # a zombie cannot be killed
    bounded.settle(0.2, "the zombie staying after SIGKILL")
    assert sim_state.process_exists(zombie["pid"], zombie["start_time"])
    os.kill(zombie["parent_pid"], signal.SIGKILL)  # the supervisor inherits and reaps it
    assert wait_until(lambda: not sim_state.process_exists(zombie["pid"], zombie["start_time"]))
    pynvml = nvml_for(node_root)
    assert pynvml.nvmlDeviceGetComputeRunningProcesses(pynvml.nvmlDeviceGetHandleByIndex(0)) == []


def test_graphics_processes_and_modes(node_root):
    state = make_node(node_root, gpus=[{"persistence_mode": True, "compute_mode": "Exclusive_Process", "mig_mode": True},
                                       {"recovery_action": "drain_and_reset"}],
                      holders=[{"kind": "fd", "gpus": [0], "memory_mib": 64, "name": "cosmic-comp", "type": "G"},
                               {"kind": "fd", "gpus": [0], "memory_mib": 183, "name": "chromium", "type": "C+G"}])
    pynvml = nvml_for(node_root)
    first, second = pynvml.nvmlDeviceGetHandleByIndex(0), pynvml.nvmlDeviceGetHandleByIndex(1)
    graphics = sorted(p.pid for p in pynvml.nvmlDeviceGetGraphicsRunningProcesses(first))
    compute = [p.pid for p in pynvml.nvmlDeviceGetComputeRunningProcesses(first)]
    assert graphics == sorted(h["pid"] for h in state["holders"])
    assert compute == [holder_named(state, "chromium")["pid"]]
    assert pynvml.nvmlDeviceGetPersistenceMode(first) == pynvml.NVML_FEATURE_ENABLED
    assert pynvml.nvmlDeviceGetPersistenceMode(second) == pynvml.NVML_FEATURE_DISABLED
    assert pynvml.nvmlDeviceGetComputeMode(first) == pynvml.NVML_COMPUTEMODE_EXCLUSIVE_PROCESS
    assert pynvml.nvmlDeviceGetMigMode(first) == [1, 1]
    with pytest.raises(pynvml.NVMLError_NotSupported):
        pynvml.nvmlDeviceGetMigMode(second)
    values = pynvml.nvmlDeviceGetFieldValues(second, [pynvml.NVML_FI_DEV_GET_GPU_RECOVERY_ACTION, pynvml.NVML_FI_DEV_ECC_CURRENT])
    assert values[0].nvmlReturn == pynvml.NVML_SUCCESS
    assert values[0].value.uiVal == pynvml.NVML_GPU_RECOVERY_ACTION_DRAIN_AND_RESET
    assert values[1].nvmlReturn == pynvml.NVML_ERROR_NOT_SUPPORTED


def test_nvlink_peers(node_root):
    make_node(node_root, gpus=[{"nvlink_peers": [1, 2]}, {"nvlink_peers": [0]}, {"nvlink_peers": [0]}, {}])
    pynvml = nvml_for(node_root)
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    peers = []
    for link in range(pynvml.NVML_NVLINK_MAX_LINKS):
        try:
            if pynvml.nvmlDeviceGetNvLinkState(handle, link):
                peers.append(pynvml.nvmlDeviceGetNvLinkRemotePciInfo(handle, link).busId)
        except pynvml.NVMLError_InvalidArgument:
            break
    assert peers == ["00000000:2A:00.0", "00000000:3A:00.0"]
    with pytest.raises(pynvml.NVMLError_NotSupported):
        pynvml.nvmlDeviceGetNvLinkState(pynvml.nvmlDeviceGetHandleByIndex(3), 0)


def test_a_lost_gpu_answers_gpu_is_lost(node_root):
    make_node(node_root, gpus=[{}, {"lost": True}])
    pynvml = nvml_for(node_root)
    lost = pynvml.nvmlDeviceGetHandleByIndex(1)
    for call in (pynvml.nvmlDeviceGetName, pynvml.nvmlDeviceGetUUID, pynvml.nvmlDeviceGetMemoryInfo,
                 pynvml.nvmlDeviceGetComputeRunningProcesses):
        with pytest.raises(pynvml.NVMLError_GpuIsLost):
            call(lost)
    assert str(pytest.raises(pynvml.NVMLError, pynvml.nvmlDeviceGetUUID, lost).value) == "GPU is lost"
    assert pynvml.nvmlDeviceGetPciInfo(lost).busId == "00000000:2A:00.0"  # cached at attach time
    assert pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(0)) == sim.DEFAULT_GPU_NAME


def test_no_driver_loaded(node_root):
    make_node(node_root, modules=[])
    pynvml = NodeLayout(str(node_root)).load_nvml()
    with pytest.raises(pynvml.NVMLError_DriverNotLoaded):
        pynvml.nvmlInit()


def test_an_unknown_symbol_is_function_not_found(node_root):
    make_node(node_root)
    pynvml = nvml_for(node_root)
    with pytest.raises(pynvml.NVMLError_FunctionNotFound):
        pynvml.nvmlDeviceGetPowerUsage(pynvml.nvmlDeviceGetHandleByIndex(0))


def test_a_hung_nvml_never_returns(node_root):
    make_node(node_root, nvml_hang=True)
    collections_dir = sim.__file__.rsplit("/ansible_collections/", 1)[0]
    program = ("import sys; sys.path.insert(0, sys.argv[1])\n"
               "from ansible_collections.gpuops.remediation.plugins.module_utils._node import NodeLayout\n"
               "NodeLayout(sys.argv[2]).load_nvml().nvmlInit()\n")
    started = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        subprocess.run([sys.executable, "-c", program, collections_dir, str(node_root)], timeout=1.5, check=False)
    assert time.monotonic() - started >= 1.5
