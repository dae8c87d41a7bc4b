"""A read-only MIG listing on a real NVIDIA GPU (see README.md): the mode of each GPU, and, where MIG is on, its
instances as NVML and as nvidia-smi mig -lgi / -lci list them, read with the collection's parsers, agreeing. It never
changes a mode nor an instance; where MIG is off on every GPU it is skipped, saying so."""
import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NVIDIA_SMI = shutil.which("nvidia-smi")
DEADLINE = 60

pytestmark = pytest.mark.skipif(NVIDIA_SMI is None or os.environ.get("GPUOPS_SIM_ROOT"),
                                reason="needs a real nvidia-smi (a GPU machine, not a simulated node)")


def _collection_modules():
    """(_mig_layout, _mig_instances) of this checkout, imported as the collection (a temporary ansible_collections tree)."""
    import importlib  # pylint: disable=import-outside-toplevel
    import tempfile  # pylint: disable=import-outside-toplevel
    base = tempfile.mkdtemp(prefix="gpuops-device-mig-")
    os.makedirs(os.path.join(base, "ansible_collections", "gpuops"))
    os.symlink(ROOT, os.path.join(base, "ansible_collections", "gpuops", "remediation"))
    sys.path.insert(0, base)
    prefix = "ansible_collections.gpuops.remediation.plugins.module_utils."
    return importlib.import_module(prefix + "_mig_layout"), importlib.import_module(prefix + "probes._mig_instances")


def smi(*args):
    return subprocess.run([NVIDIA_SMI] + list(args), capture_output=True, text=True, timeout=DEADLINE, check=False)


def mig_modes():
    """{index: (current, pending)} from nvidia-smi's CSV ("Enabled", "Disabled", "[N/A]" where MIG is not supported)."""
    result = smi("--query-gpu=index,mig.mode.current,mig.mode.pending", "--format=csv,noheader")
    assert result.returncode == 0, result.stderr
    modes = {}
    for line in result.stdout.splitlines():
        index, current, pending = [part.strip() for part in line.split(",")]
        modes[int(index)] = (current, pending)
    return modes


def nvml_instances(indexes):
    """{(gpu, gi, ci)} of every MIG device NVML lists on the GPUs `indexes` (read calls only)."""
    pynvml = pytest.importorskip("pynvml", reason="nvidia-ml-py is not installed")
    pynvml.nvmlInit()
    try:
        found = set()
        for index in indexes:
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            for slot in range(pynvml.nvmlDeviceGetMaxMigDeviceCount(handle)):
                try:
                    device = pynvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, slot)
                except pynvml.NVMLError_NotFound:
                    continue
                found.add((index, pynvml.nvmlDeviceGetGpuInstanceId(device), pynvml.nvmlDeviceGetComputeInstanceId(device)))
        return found
    finally:
        pynvml.nvmlShutdown()


def test_mig_listing_is_read_only_and_nvml_and_nvidia_smi_agree():
    modes = mig_modes()
    print("MIG mode per GPU (current, pending): %r" % modes)
    on = sorted(index for index, (current, dummy) in modes.items() if current == "Enabled")
    if not on:
        pytest.skip("MIG mode is off on every GPU here (%s): nothing to list; this check never turns it on"
                    % ", ".join("GPU %d: %s" % (index, current) for index, (current, dummy) in sorted(modes.items())))
    layout, listings = _collection_modules()
    lgi, lci = smi("mig", "-lgi"), smi("mig", "-lci")
    assert lgi.returncode in (0, layout.RC_NOT_FOUND) and lci.returncode in (0, layout.RC_NOT_FOUND), (lgi.stdout, lci.stdout)
    gpu_instances, compute_instances = listings.parse_lgi(lgi.stdout), listings.parse_lci(lci.stdout)
    print(lgi.stdout + lci.stdout)
    built = layout.build_layout(gpu_instances, compute_instances, on)
    print("layout: %r" % built)
    # every listed instance is read (a row the parser missed would be a layout lost on restore)
    assert len(gpu_instances) == sum(1 for line in lgi.stdout.splitlines() if "MIG " in line)
    assert len(compute_instances) == sum(1 for line in lci.stdout.splitlines() if "MIG " in line)
    assert set(key for key in compute_instances if key[0] in on) == nvml_instances(on)
    # read-only: the modes and the layout are as they were
    assert mig_modes() == modes
    assert layout.build_layout(listings.parse_lgi(smi("mig", "-lgi").stdout), listings.parse_lci(smi("mig", "-lci").stdout), on) == built


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-v"]))
