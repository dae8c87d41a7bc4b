# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A MIG layout a run recorded before its reset, reload or re-creation, and that run died before it acted (no intent of
the reset, the driver's unload or the destroy after the record, in the journal that every action is written to before it
is done): the layout was never lost, so the next run creates nothing of it, whatever the operator changed by hand since.
A record whose run went on to act is restored by the next run (test_mig_layout_restore).

Real ansible-playbook runs on a simulated MIG node: a real gpu_reset writes the journal, which is then cut where a run
that died before its reset stops writing (the journal is written ahead of each action, a line at a time)."""

from __future__ import annotations

import json
import os

from ansible_collections.gpuops.remediation.plugins.module_utils.journal._evidence import left_unrestored_layouts
from ansible_collections.gpuops.remediation.tests.unit.helpers.mig_play import play
from ansible_collections.gpuops.remediation.tests.unit.helpers.reset_run import reset_gpu
from ansible_collections.gpuops.remediation.tests.unit.plugins.plugin_utils.test_mig_layout_restore import journal, layout_of, mig_node
from ansible_collections.gpuops.remediation.tests.unit.plugins.plugin_utils.test_mig_reboot_layout import remove_instance_at


def _journal_path(root):
    return os.path.join(root, "var", "lib", "gpuops", "journal.jsonl")


def _cut_before(root, action):
    """The journal as the run left it had it died just before journalling the intent of `action`: every line before it."""
    with open(_journal_path(root), encoding="utf-8") as handle:
        lines = handle.readlines()
    cut = next(number for number, line in enumerate(lines)
               if json.loads(line)["action"] == action and json.loads(line)["phase"] == "intent")
    with open(_journal_path(root), "w", encoding="utf-8") as handle:
        handle.writelines(lines[:cut])


def _line(entry_id, action, phase="intent", **extra):
    return dict({"ts": "2026-12-06T10:00:00Z", "run_id": entry_id.split("-")[0], "id": entry_id, "phase": phase, "action": action},
                **extra)


def test_only_the_recording_modules_own_later_action_loses_the_layout():
    """The same module (the entry ids' run and token) and a later entry: another module's reset (another token, even of
    the same run id), or one written before the record, lost nothing of it. A record for a reboot (its boot id decides)
    and one a later run took over (the earlier loss stands) are never answered this way."""
    record = _line("r-t1-3", "mig_layout", layout={"0": []})
    for action in ("gpu_reset", "module_unload", "mig_destroy"):
        assert left_unrestored_layouts([record, _line("r-t1-4", action)]) == [record], action
    for others in ([_line("r-t2-4", "gpu_reset")], [_line("r-t1-2", "gpu_reset")], [_line("r-t1-4", "systemctl_stop")],
                   [_line("r-t1-4", "gpu_reset", phase="outcome")]):
        assert left_unrestored_layouts([record] + others) == [], others
    for kept in (dict(record, boot_id="0f0c3c2e-8b1c-4c7e-9a59-1f7f3c1d2b6a"), dict(record, boot_id=None), dict(record, of=["q-t0-1"])):
        assert left_unrestored_layouts([kept]) == [kept], kept


def test_a_layout_whose_run_died_before_its_reset_is_not_created_over_the_operators(tmp_path, node_root, collections_root):
    before = mig_node(node_root)
    play(tmp_path, collections_root, node_root, ["gpuops.remediation.gpu_reset: {gpus: [0], force: true, run_id: died}"], ["reset"])
    _cut_before(node_root, "gpu_reset")
    assert [(r["action"], r["phase"]) for r in journal(node_root) if r["action"] == "mig_layout"] == [("mig_layout", "intent")]
    assert layout_of(node_root) == before  # the died run never reset: the layout is the one it recorded
    remove_instance_at(node_root, 6)  # the operator's change, on purpose
    kept = layout_of(node_root)
    created_before = _creates(node_root)
    # the next run, check mode and real: nothing of the old layout is created over the operator's
    (tmp_path / "next").mkdir()
    checked, dummy, dummy = reset_gpu(str(tmp_path / "next"), node_root, collections_root, extra=["--check"])
    with open(str(tmp_path / "next" / ("reports-" + os.path.basename(node_root)) / "latest-plan.json"), encoding="utf-8") as handle:
        plan = json.load(handle)["hosts"][0]
    assert checked.returncode == 0 and plan["status"] == "clean" and plan["rungs_tried"] == [], checked.stdout[-3000:]
    run, report, dummy = reset_gpu(str(tmp_path / "next"), node_root, collections_root)
    assert run.returncode == 0 and report["status"] == "clean" and report["rungs_tried"] == [], run.stdout[-3000:]
    # an acting module, under the node lock, reports the died run's action as interrupted and creates nothing
    acting = play(tmp_path / "next", collections_root, node_root, ["gpuops.remediation.gpu_kill: {gpus: [0]}"], ["acting"])["acting"]
    assert [entry["action"] for entry in acting["interrupted_actions"]] == ["mig_layout"], acting
    assert "restored_mig_layouts" not in acting, acting["restored_mig_layouts"]
    assert layout_of(node_root) == kept and _creates(node_root) == created_before
    assert left_unrestored_layouts(journal(node_root)) == []


def _creates(root):
    """The instance-creating commands the simulated node ran so far."""
    with open(os.path.join(root, "commands.jsonl"), encoding="utf-8") as handle:
        return [line for line in handle if '"-cgi"' in line or '"-cci"' in line]
