# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Never lose the MIG layout, through real ansible-playbook runs of gpu_reset and nvidia_driver_reload on simulated MIG
nodes: the layout journaled before, created again after, read back; check mode plans the same; a second run changes
nothing; a run killed between the reset and the restore is restored by the next run; no room fails naming what is
missing; a GPU whose MIG mode change is pending is never reset as a side effect."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys


from ansible_collections.gpuops.remediation.plugins.module_utils.simulation import _sim_build as sim
from ansible_collections.gpuops.remediation.plugins.module_utils.simulation import _sim_mig_write as mig_write
from ansible_collections.gpuops.remediation.plugins.module_utils.simulation import _sim_state as sim_state
from ansible_collections.gpuops.remediation.tests.unit.helpers import bounded, playbook
from ansible_collections.gpuops.remediation.tests.unit.helpers.mig_play import play

A100 = "NVIDIA A100-SXM4-80GB"
# 4g.40gb at 0, 2g.20gb at 4, 1g.10gb at 6: the placements a -cgi without them would not choose in this order
LAYOUT = "5:0,14:4,19:6"


def smi(root, *args):
    return bounded.run([os.path.join(root, "bin", "nvidia-smi")] + list(args), "simulated nvidia-smi %s" % " ".join(args),
                       capture_output=True, text=True)


def layout_of(root, index=0):
    """(profile, start, compute profiles) of each GPU instance, as the simulated driver holds them."""
    gpu = sim_state.load_state(root)["gpus"][index]
    return sorted((gi["profile_id"], gi["start"], sorted(ci["profile_id"] for ci in gi["compute_instances"]))
                  for gi in gpu.get("gpu_instances", []))


def mig_node(root, second_gpu=None):
    gpus = [{"name": A100, "memory_mib": 81920, "mig_mode": True}] + ([second_gpu] if second_gpu else [])
    sim.create_node(root, {"gpus": gpus})
    assert smi(root, "mig", "-i", "0", "-cgi", LAYOUT, "-C").returncode == 0
    return layout_of(root)


def journal(root):
    with open(os.path.join(root, "var", "lib", "gpuops", "journal.jsonl"), encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def lock_holders(root):
    """The pids /proc/locks names as holding the node lock of root (the acting module)."""
    st = os.stat(os.path.join(root, "run", "gpuops.lock"))
    wanted = "%02x:%02x:%d" % (os.major(st.st_dev), os.minor(st.st_dev), st.st_ino)
    with open("/proc/locks", encoding="ascii") as handle:
        fields = [line.split() for line in handle]
    return sorted(set(int(words[4]) for words in fields if len(words) > 5 and words[5] == wanted and words[4].isdigit()))


def start_held_reset(tmp_path, collections_root, root, out=None):
    """ansible-playbook running gpu_reset (force) on GPU 0, in a session of its own, with the simulated MIG listings held
    once the reset went through (mig_write.HOLD_KEY): the run waits there, between its reset and its restore. out: where
    the play writes the module's result (the task then ignores its failure)."""
    sim_state.update_state(root, lambda state: state.update({mig_write.HOLD_KEY: True}))
    first = tmp_path / "first"
    first.mkdir()
    task = "    - gpuops.remediation.gpu_reset: {gpus: [0], force: true, probe_timeout: 300}\n      environment: {GPUOPS_SIM_ROOT: %s}\n" % root
    if out:
        task += ("      register: reset\n      ignore_errors: true\n"
                 "    - ansible.builtin.copy: {content: \"{{ reset | to_json }}\", dest: %s, mode: \"0600\"}\n" % out)
    with open(first / "play.yml", "w", encoding="utf-8") as handle:
        handle.write(playbook.PLAY + task)
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=collections_root, ANSIBLE_LOCALHOST_WARNING="false")
    return bounded.start(playbook.ANSIBLE_PLAYBOOK + ["-i", "localhost,", "-e", "ansible_python_interpreter=" + sys.executable,
                                                      str(first / "play.yml")], env=env, cwd=str(first), stdout=subprocess.DEVNULL,
                         start_new_session=True)


def test_a_reset_of_a_mig_gpu_restores_its_layout_exactly_and_check_mode_plans_it(tmp_path, node_root, collections_root):
    before = mig_node(node_root)
    results = play(tmp_path, collections_root, node_root, [
        "gpuops.remediation.gpu_reset: {gpus: [0], force: true}\n      check_mode: true",
        "gpuops.remediation.gpu_reset: {gpus: [0], force: true}",
        "gpuops.remediation.gpu_reset: {gpus: [0]}",
    ], ["plan", "real", "again"])
    plan, real, again = results["plan"], results["real"], results["again"]
    assert sim_state.load_state(node_root)["gpus"][0]["mig_mode"]["current"] is True
    assert layout_of(node_root) == before == [(5, 0, [3]), (14, 4, [1]), (19, 6, [0])]
    assert real["mig_layout"]["ok"] is True and real["mig_layout"]["missing"] == []
    assert real["mig_layout"]["created"] == [
        "GPU 0: 4g.40gb (profile 5) at placement 0 with compute instance of profile 3",
        "GPU 0: 2g.20gb (profile 14) at placement 4 with compute instance of profile 1",
        "GPU 0: 1g.10gb (profile 19) at placement 6 with compute instance of profile 0"]
    # check mode names what the real run re-created, and changed nothing
    assert plan["changed"] is True and plan["mig_layout"]["would_restore"] == real["mig_layout"]["created"]
    assert plan["mig_layout"]["recorded"] == real["mig_layout"]["recorded"]
    # the journal: the layout recorded before the reset, every create journalled, the outcome ok after it
    records = journal(node_root)
    actions = [(record["action"], record["phase"]) for record in records]
    assert actions.index(("mig_layout", "intent")) < actions.index(("gpu_reset", "intent")) < actions.index(("mig_create", "intent"))
    outcome = [record for record in records if record["action"] == "mig_layout" and record["phase"] == "outcome"]
    assert [record["ok"] for record in outcome] == [True]
    creates = [record["argv"][1:] for record in records if record["action"] == "mig_create" and record["phase"] == "intent"]
    assert creates[0] == ["mig", "-i", "0", "-cgi", "5:0"] and creates[1][:5] == ["mig", "-i", "0", "-cci", "3"]
    # a second run has nothing to reset and changes nothing
    assert again["changed"] is False and "mig_layout" not in again


def test_a_run_killed_after_the_reset_is_restored_by_the_next_run(tmp_path, node_root, collections_root):
    before = mig_node(node_root)
    run = start_held_reset(tmp_path, collections_root, node_root)
    try:
        # the reset went through and the restore hangs reading the layout back: the fact the kill waits on
        bounded.until(lambda: sim_state.load_state(node_root).get(mig_write.HELD_KEY), "the reset of GPU 0 to have happened")
        assert layout_of(node_root) == []
        # the module runs in a session of its own: kill it by the node lock it holds, then the play
        bounded.until(lambda: lock_holders(node_root), "the reset module holding the node lock")
        for pid in lock_holders(node_root):
            os.kill(pid, signal.SIGKILL)
        os.killpg(run.pid, signal.SIGKILL)
        bounded.wait(run, "ansible-playbook after SIGKILL")
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
        sim_state.update_state(node_root, lambda state: state.update({mig_write.HOLD_KEY: False, mig_write.HELD_KEY: False}))
    assert [r["ok"] for r in journal(node_root) if r["action"] == "mig_layout" and r["phase"] == "outcome"] == []
    # the next run, as an operator runs it (nothing to reset now): the snapshot names the layout left unrestored, the
    # walk takes the instance rung, whose module restores it first, under the lock; check mode plans that, changing nothing
    from ansible_collections.gpuops.remediation.tests.unit.helpers.reset_run import reset_gpu, resets
    checked, dummy, so_far = reset_gpu(str(tmp_path), node_root, collections_root, extra=["--check"])
    assert checked.returncode == 0, checked.stdout[-4000:]
    assert len(resets(so_far)) == 1  # the killed run's
    with open(os.path.join(str(tmp_path), "reports-node", "latest-plan.json"), encoding="utf-8") as handle:
        plan = json.load(handle)["hosts"][0]
    assert plan["entry_rung"] == "instance" and [step["rung"] for step in plan["rungs_tried"]] == ["instance"]
    assert plan["rungs_tried"][0]["plan"][0].startswith("restore the MIG layout of GPU 0 that run ")
    assert layout_of(node_root) == []
    run, report, commands = reset_gpu(str(tmp_path), node_root, collections_root)
    assert run.returncode == 0, run.stdout[-4000:]
    assert layout_of(node_root) == before
    assert report["status"] == "fixed" and report["fixed_by"] == "instance" and resets(commands) == resets(so_far)
    assert report["rungs_tried"][0]["plan"] == plan["rungs_tried"][0]["plan"]
    assert [r["ok"] for r in journal(node_root) if r["action"] == "mig_layout" and r["phase"] == "outcome"][-1] is True
    dummy, again, dummy_commands = reset_gpu(str(tmp_path), node_root, collections_root)
    assert again["status"] == "clean" and again["rungs_tried"] == []


def test_no_room_to_restore_fails_naming_what_is_missing(tmp_path, node_root, collections_root):
    mig_node(node_root)
    # what the run will find after the reset: someone took slice 6 first (a 1g.10gb there), so the recorded 1g at 6
    # has no room; the simulated reset is followed by that creation through the hold knob's release below
    out = str(tmp_path / "reset.json")
    run = start_held_reset(tmp_path, collections_root, node_root, out)
    try:
        bounded.until(lambda: sim_state.load_state(node_root).get(mig_write.HELD_KEY), "the reset of GPU 0 to have happened")
        sim_state.update_state(node_root, lambda state: state.update({mig_write.HOLD_KEY: False}))
        assert smi(node_root, "mig", "-i", "0", "-cgi", "15:6", "-C").returncode == 0  # a 1g.20gb over slices 6-7
        sim_state.update_state(node_root, lambda state: state.update({mig_write.HELD_KEY: False}))
        assert bounded.wait(run, "the reset run") == 0
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
    with open(out, encoding="utf-8") as handle:
        reset = json.load(handle)
    assert reset["failed"] is True
    assert reset["mig_layout"]["missing"] == ["GPU 0: 1g.10gb (profile 19) at placement 6 with compute instance of profile 0"]
    assert "the MIG layout was not restored: missing GPU 0: 1g.10gb (profile 19) at placement 6" in reset["msg"]
    assert "Insufficient Resources" in reset["msg"]
    assert layout_of(node_root) == [(5, 0, [3]), (14, 4, [1]), (15, 6, [0])]


def test_a_gpu_whose_mig_mode_change_is_pending_is_not_reset_nor_reloaded(tmp_path, node_root, collections_root):
    sim.create_node(node_root, {"gpus": [{"name": A100, "memory_mib": 81920, "mig_mode": False, "ghost_mib": 2048}]})
    sim_state.update_state(node_root, lambda state: state["gpus"][0].update(mig_mode={"current": False, "pending": True}))
    results = play(tmp_path, collections_root, node_root, [
        "gpuops.remediation.gpu_reset: {gpus: [0]}",
        "gpuops.remediation.nvidia_driver_reload: {}\n      ignore_errors: true",
        "gpuops.remediation.nvidia_driver_reload: {}\n      check_mode: true\n      ignore_errors: true",
    ], ["reset", "reload", "reload_check"])
    reset = results["reset"]
    assert reset["changed"] is False
    assert reset["gpus"][0]["reset"] is False
    assert "MIG mode change is pending (now off, on after a reset)" in reset["gpus"][0]["reason"]
    for name in ("reload", "reload_check"):
        assert results[name]["failed"] is True and results[name]["changed"] is False
        assert "GPU 0: its MIG mode change is pending" in results[name]["msg"]
    assert sim_state.load_state(node_root)["gpus"][0]["mig_mode"] == {"current": False, "pending": True}
    assert sim_state.load_state(node_root).get("driver_unloads", 0) == 0


def test_a_driver_reload_restores_the_layout(tmp_path, node_root, collections_root):
    before = mig_node(node_root)
    results = play(tmp_path, collections_root, node_root, ["gpuops.remediation.nvidia_driver_reload: {force: true}"], ["reload"])
    assert sim_state.load_state(node_root)["driver_unloads"] == 1
    assert results["reload"]["mig_layout"]["ok"] is True and len(results["reload"]["mig_layout"]["created"]) == 3
    assert layout_of(node_root) == before
