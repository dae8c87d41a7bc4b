# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A simulated tool starts as lean as the C binary it stands in for: `systemctl show` (what every snapshot runs) imports
the state file's code and nothing of the rest of the simulation, nor json, datetime or the lock; the other commands
import what they read on first use and answer as before."""

from __future__ import annotations

import json
import os
import sys

import pytest

from ansible_collections.gpuops.remediation.plugins.module_utils.simulation import _sim_build as sim

from ansible_collections.gpuops.remediation.tests.unit.helpers import bounded

NOT_FOR_SHOW = ("json", "datetime", "contextlib", "shutil", "_sim_processes", "_sim_rules", "_sim_dcgmi", "_sim_mig", "_sim_mig_write",
                "_lock", "_safe_files", "_pci")


@pytest.fixture
def node_root(tmp_path):
    root = str(tmp_path / "node")
    sim.create_node(root, {"gpus": [{}, {}], "services": ["nvidia-persistenced"]})
    yield root
    sim.destroy_node(root)


def _imported(stderr):
    """The modules -X importtime lists, by their last dotted part."""
    return set(line.split("|")[-1].strip().rsplit(".", 1)[-1] for line in stderr.splitlines() if line.startswith("import time:"))


def _tool(root, *argv):
    return bounded.run([sys.executable, "-SE", "-X", "importtime", os.path.join(root, "bin", argv[0])] + list(argv[1:]),
                       "the simulated %s" % argv[0], capture_output=True, text=True, env={"GPUOPS_SIM_ROOT": root, "LC_ALL": "C"})


def test_systemctl_show_reads_the_state_and_imports_nothing_else(node_root):
    done = _tool(node_root, "systemctl", "show", "--property=Id,LoadState,ActiveState,MainPID", "nvidia-persistenced.service",
                 "no-such-unit.service")
    assert done.returncode == 0, done.stderr
    shown = done.stdout.split("\n\n")
    assert shown[0].splitlines()[:3] == ["Id=nvidia-persistenced.service", "LoadState=loaded", "ActiveState=active"]
    assert int(shown[0].splitlines()[3].split("=")[1]) > 0
    assert shown[1].splitlines() == ["Id=no-such-unit.service", "LoadState=not-found", "ActiveState=inactive", "MainPID=0"]
    imported = _imported(done.stderr)
    assert "_sim_state" in imported and "_sim_tools" in imported
    assert not imported & set(NOT_FOR_SHOW), sorted(imported & set(NOT_FOR_SHOW))
    with open(os.path.join(node_root, "commands.jsonl")) as handle:
        assert handle.read().splitlines()[-1].startswith('{"tool": "systemctl", "argv": ["show", "--property=Id,LoadState,ActiveState,MainPID", ')


def test_the_other_commands_import_what_they_read_on_first_use(node_root):
    listed = _tool(node_root, "nvidia-smi", "-L")
    assert listed.returncode == 0, listed.stderr
    assert [line.split(" (UUID")[0] for line in listed.stdout.splitlines()] == ["GPU 0: NVIDIA H100 80GB HBM3", "GPU 1: NVIDIA H100 80GB HBM3"]
    described = _tool(node_root, "systemctl", "show", "-p", "Description", "nvidia-persistenced")
    assert described.stdout.startswith("Description=") and len(described.stdout.strip()) > len("Description=")
    stopped = _tool(node_root, "systemctl", "stop", "nvidia-persistenced")
    assert stopped.returncode == 0, stopped.stderr
    assert _tool(node_root, "systemctl", "is-active", "nvidia-persistenced").stdout == "inactive\n"


# Loads the simulated NVML library the way a module's probe child does: from the node's lib/ (a module's payload holds
# none of the simulation's library), bound to pynvml (NodeLayout.load_nvml), under PYTHONDONTWRITEBYTECODE=1; prints what
# it compiled from source and what NVML answered.
LOAD_NVML = """
import builtins, json, sys
compiled = []
real_compile = builtins.compile
def compile(source, filename, *args, **kwargs):
    compiled.append(str(filename))
    return real_compile(source, filename, *args, **kwargs)
builtins.compile = compile
sys.path.insert(0, sys.argv[1] + "/lib")
import _sim_nvml
import pynvml
pynvml.nvmlLib = _sim_nvml.SimNvmlLibrary(sys.argv[1])
pynvml._nvmlGetFunctionPointer_cache = {}
pynvml.nvmlInit()
print(json.dumps({"compiled": compiled, "gpus": pynvml.nvmlDeviceGetCount()}))
"""


def _load_nvml(root, what):
    done = bounded.run([sys.executable, "-c", LOAD_NVML, root], what, capture_output=True, text=True,
                       env={"LC_ALL": "C", "PYTHONDONTWRITEBYTECODE": "1"})
    assert done.returncode == 0, done.stderr
    loaded = json.loads(done.stdout)
    assert loaded["gpus"] == 2
    return set(os.path.basename(name) for name in loaded["compiled"] if name.startswith(os.path.join(root, "lib")))


def test_the_nvml_library_loads_compiled_where_python_writes_no_bytecode(node_root):
    assert _load_nvml(node_root, "the simulated NVML library's load") == set()
    # Without the bytecode gpu_sim keeps, each load compiles the library's files from source and keeps nothing.
    cache = os.path.join(node_root, "lib", "__pycache__")
    for name in os.listdir(cache):
        os.unlink(os.path.join(cache, name))
    assert _load_nvml(node_root, "the simulated NVML library's load from source") == set(sim.NVML_LIBRARY_FILES)
    assert os.listdir(cache) == []


def test_a_library_file_changed_after_its_bytecode_is_what_loads(node_root):
    # An edit of the node's library that keeps the file's size and modification second: a bytecode file that records
    # only those (a timestamp .pyc) would still be loaded in its place; the source's hash is what decides.
    path = os.path.join(node_root, "lib", "_pci.py")
    before = os.stat(path)
    changed = "CHANGED = '%s'\n" % ("x" * (before.st_size - len("CHANGED = ''\n")))
    with open(path, "w", encoding="ascii") as handle:
        handle.write(changed)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert os.stat(path).st_size == before.st_size
    done = bounded.run([sys.executable, "-c", "import sys; sys.path.insert(0, sys.argv[1]); import _pci; print(hasattr(_pci, 'CHANGED'))",
                        os.path.join(node_root, "lib")], "the changed library file's load", capture_output=True, text=True,
                       env={"LC_ALL": "C", "PYTHONDONTWRITEBYTECODE": "1"})
    assert done.returncode == 0, done.stderr
    assert done.stdout == "True\n"
