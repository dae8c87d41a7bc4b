# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A MIG layout record is a journal line that root acts on (the next acting module creates what is missing of it): it is
believed only from a journal root owns, read through no link. Real ansible-playbook runs on a simulated MIG node: a real
gpu_reset writes the journal, cut where a run killed after its reset stops writing; the instances the reset lost are
gone. From root's journal the next acting module creates them again; from the same journal owned by another account, or
reached through a link, it fails naming the file and creates nothing."""

from __future__ import annotations

import json
import os

import pytest

from ansible_collections.gpuops.remediation.tests.unit.helpers.mig_play import play
from ansible_collections.gpuops.remediation.tests.unit.plugins.plugin_utils.test_mig_layout_restore import layout_of, mig_node, smi
from ansible_collections.gpuops.remediation.tests.unit.plugins.plugin_utils.test_mig_layout_never_lost import _journal_path

ACTING = "gpuops.remediation.gpu_kill: {gpus: [0]}\n      ignore_errors: true"


def _killed_after_its_reset(tmp_path, collections_root, root):
    """The journal and the node as a gpu_reset killed between its reset and its restore leaves them."""
    before = mig_node(root)
    play(tmp_path, collections_root, root, ["gpuops.remediation.gpu_reset: {gpus: [0], force: true, run_id: killed}"], ["reset"])
    with open(_journal_path(root), encoding="utf-8") as handle:
        lines = handle.readlines()
    cut = next(number for number, line in enumerate(lines) if json.loads(line)["action"] == "mig_create")
    with open(_journal_path(root), "w", encoding="utf-8") as handle:
        handle.writelines(lines[:cut])
    assert smi(root, "mig", "-i", "0", "-dci").returncode == 0 and smi(root, "mig", "-i", "0", "-dgi").returncode == 0
    assert layout_of(root) == []
    return before


def test_a_record_in_roots_journal_is_restored(tmp_path, node_root, collections_root):
    before = _killed_after_its_reset(tmp_path, collections_root, node_root)
    (tmp_path / "next").mkdir()
    acting = play(tmp_path / "next", collections_root, node_root, [ACTING], ["acting"])["acting"]
    assert [report["ok"] for report in acting["restored_mig_layouts"]] == [True], acting
    assert layout_of(node_root) == before


@pytest.mark.parametrize("how", ["another account's", "a link"])
def test_a_record_in_a_journal_root_cannot_believe_is_never_acted_on(tmp_path, node_root, collections_root, how):
    if os.geteuid() != 0:
        pytest.skip("not run: a journal of another account's needs root to make")
    _killed_after_its_reset(tmp_path, collections_root, node_root)
    path = _journal_path(node_root)
    if how == "a link":
        os.rename(path, path + ".real")
        os.symlink(path + ".real", path)
    else:
        os.chown(path, 65534, 65534)
    (tmp_path / "next").mkdir()
    acting = play(tmp_path / "next", collections_root, node_root, [ACTING], ["acting"])["acting"]
    assert acting["failed"] is True and "restored_mig_layouts" not in acting, acting
    why = "it is a symbolic link" if how == "a link" else "it belongs to uid 65534"
    assert "%r is refused: %s" % (path, why) in acting["msg"], acting["msg"]
    assert layout_of(node_root) == []
