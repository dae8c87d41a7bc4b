# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""An acting module imports nvidia-ml-py before its probe children fork, but never outside the probe deadline: an
nvidia-ml-py whose import hangs or exits (a broken install, a hung mount under site-packages) fails the module's
NVML probe within probe_timeout, with the probe's own message, as when only the probe's child imported it (before,
the module hung past any deadline, or died without a result). Through
ansible-playbook on a simulated node, the broken pynvml first on the module's PYTHONPATH; the task's own timeout is
far above the probe's, so a module that hangs shows as Ansible's timeout message."""

from __future__ import annotations

import pytest

from ansible_collections.gpuops.remediation.plugins.module_utils.simulation import _sim_build as sim
from ansible_collections.gpuops.remediation.tests.unit.helpers.playbook import run_playbook

# The broken module's source, and the probe's error for it.
BROKEN_IMPORTS = {
    # Blocks in a system call that never returns (select with no file and no timeout).
    "hangs": ("import select\nselect.select([], [], [])\n", "nvml probe gave no answer within 2.0 s"),
    # Ends the interpreter from its import (SystemExit is no Exception).
    "exits": ("raise SystemExit(3)\n", "SystemExit: 3"),
}
TASK_TIMEOUT = 60
TASKS = """
    - gpuops.remediation.gpu_kill: {gpus: ["0"], backend: nvml, probe_timeout: 2}
      environment: {GPUOPS_SIM_ROOT: "%(root)s", PYTHONPATH: "%(site)s"}
      timeout: %(timeout)d
      ignore_errors: true
      register: kill
    - ansible.builtin.copy: {content: "{{ kill | to_json }}", dest: "%(out)s", mode: "0600"}
"""


@pytest.mark.parametrize("broken", sorted(BROKEN_IMPORTS))
def test_a_broken_nvml_import_fails_the_probe_within_its_deadline(tmp_path, node_root, collections_root, broken):
    sim.create_node(node_root, {"gpus": [{}, {}]})
    site = tmp_path / "site"
    site.mkdir()
    source, error = BROKEN_IMPORTS[broken]
    (site / "pynvml.py").write_text(source, encoding="utf-8")
    out = tmp_path / "out.json"
    tasks = TASKS % {"root": node_root, "site": site, "timeout": TASK_TIMEOUT, "out": out}
    result = run_playbook(str(tmp_path), collections_root, tasks, str(out))
    # The module answered (neither Ansible's timeout nor a module that died without a result), changed nothing, and
    # its inspection says the NVML probe failed, in the probe's own words, within the probe's deadline.
    assert "timedout" not in result and "module_stderr" not in result, result["msg"]
    assert result["changed"] is False and result["signalled"] == [], result
    probe = result["snapshot_after"]["probes"]["gpu"]
    assert probe["backend"] == "nvml" and probe["ok"] is False, probe
    assert probe["error"] == error, probe
