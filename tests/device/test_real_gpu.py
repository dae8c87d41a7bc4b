"""gpu_holders_info and gpu_kill on a real NVIDIA GPU, against a real CUDA process (see README.md)."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HOLDER_PID = int(os.environ.get("GPUOPS_DEVICE_HOLDER_PID", "0"))
HOLDER_MIB = int(os.environ.get("GPUOPS_DEVICE_HOLDER_MIB", "0"))

pytestmark = pytest.mark.skipif(not HOLDER_PID, reason="needs GPUOPS_DEVICE_HOLDER_PID from real-gpu-check.sh on a GPU machine")

PLAYBOOK = """
- hosts: localhost
  gather_facts: false
  tasks:
    - name: {name}
      gpuops.remediation.{module}: {args}
      register: result
    - name: Save the result
      ansible.builtin.copy:
        content: "{{{{ result | to_json }}}}"
        dest: {out}
        mode: "0600"
"""


@pytest.fixture(scope="module")
def collections_dir():
    base = tempfile.mkdtemp(prefix="gpuops-device-")
    os.makedirs(os.path.join(base, "ansible_collections", "gpuops"))
    os.symlink(ROOT, os.path.join(base, "ansible_collections", "gpuops", "remediation"))
    yield base
    shutil.rmtree(base)


def run_module(collections_dir, module, args, check=False):
    out = os.path.join(collections_dir, "%s.json" % module)
    playbook = os.path.join(collections_dir, "%s.yml" % module)
    with open(playbook, "w") as handle:
        handle.write(PLAYBOOK.format(name=module, module=module, args=json.dumps(args), out=out))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=collections_dir, ANSIBLE_PYTHON_INTERPRETER=sys.executable)
    env.pop("GPUOPS_SIM_ROOT", None)
    argv = [shutil.which("ansible-playbook") or "ansible-playbook", "-i", "localhost,", "-c", "local", playbook] + (["--check"] if check else [])
    subprocess.run(argv, check=True, env=env)
    with open(out) as handle:
        return json.load(handle)


def start_time(pid):
    with open("/proc/%d/stat" % pid) as handle:
        return int(handle.read().rsplit(")", 1)[1].split()[19])


@pytest.mark.parametrize("backend", ["nvml", "nvidia_smi"])
def test_holders_info_finds_the_cuda_process(collections_dir, backend):
    result = run_module(collections_dir, "gpu_holders_info", {"backend": backend}, check=(backend == "nvidia_smi"))
    assert result["changed"] is False
    assert result["backend"] == backend and result["simulated"] is False
    holder = [h for h in result["holders"] if h["pid"] == HOLDER_PID]
    assert holder, "holder %d not in %s" % (HOLDER_PID, [h["pid"] for h in result["holders"]])
    holder = holder[0]
    assert holder["start_time"] == start_time(HOLDER_PID)
    assert "nvml" in holder["seen_by"] and "fd" in holder["seen_by"]
    assert any(path.startswith("/dev/nvidia") for path in holder["devices"])
    assert abs(holder["used_mib"] - HOLDER_MIB) <= 0.05 * HOLDER_MIB + 600  # CUDA context overhead on top of the tensor
    for gpu in result["gpus"]:
        assert gpu["unattributed_mib"] is not None and gpu["unattributed_mib"] < 1024, gpu
    assert result["verdict"]["rung"] == "kill"


def test_gpu_kill_ends_the_holder_and_the_memory_comes_back(collections_dir):
    before = run_module(collections_dir, "gpu_holders_info", {})
    holder = [h for h in before["holders"] if h["pid"] == HOLDER_PID][0]
    result = run_module(collections_dir, "gpu_kill", {"holders": [{"pid": HOLDER_PID, "start_time": holder["start_time"]}], "grace": 10,
                                                      "journal_path": os.path.join(collections_dir, "journal.jsonl")})
    assert result["changed"] is True
    assert [s["pid"] for s in result["signalled"]] == [HOLDER_PID]
    assert result["still_listed"] == []
    freed = sum(g["freed_mib"] or 0 for g in result["gpus"])
    assert freed >= 0.9 * HOLDER_MIB
    # The holder is the script's child: until the script waits for it, it stays a zombie, which holds no memory.
    assert not os.path.exists("/proc/%d/stat" % HOLDER_PID) or process_state(HOLDER_PID) == "Z"


def process_state(pid):
    with open("/proc/%d/stat" % pid) as handle:
        return handle.read().rsplit(")", 1)[1].split()[0]
