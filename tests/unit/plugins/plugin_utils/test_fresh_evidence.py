# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A fresh Xid that asks for a reset resets the GPU even when it holds no memory; an answered one asks for nothing.

The real reset_gpu.yml (ansible-playbook in a child) against a simulated node whose GPU is idle: an Xid 119 in its
kernel log (NVIDIA's catalog: reset), or an Xid 63 under a site policy {63: reset} (a row remap takes effect only at a
reset) - each is evidence on its own: the walk takes the reset, and the run is fixed by it. The next run finds the Xid
answered by that reset (the node's journal) and leaves the GPU alone; the Xid 63 without the site policy asks for
nothing at all."""

import pytest

from ansible_collections.gpuops.remediation.tests.unit.helpers.reset_run import idle_xid_nodes, reset_gpu as _reset_gpu, resets as _resets


@pytest.fixture
def node():
    with idle_xid_nodes() as made:
        yield made


@pytest.mark.parametrize("xid, policy", [(119, None), (63, {63: "reset"})], ids=["xid119-catalog", "xid63-site-policy"])
def test_a_fresh_xid_asking_for_a_reset_resets_the_idle_gpu_and_once_answered_asks_for_nothing(node, collections_root, xid, policy):
    directory, make = node
    root = make(xid)
    run, report, commands = _reset_gpu(directory, root, collections_root, policy)
    assert run.returncode == 0, run.stdout[-3000:]
    assert (report["status"], report["fixed_by"]) == ("fixed", "reset"), report
    assert [step["rung"] for step in report["rungs_tried"]] == ["reset"]
    assert len(_resets(commands)) == 1 and "0000:18:00.0" in " ".join(_resets(commands)[0]), commands

    run, report, commands = _reset_gpu(directory, root, collections_root, policy)
    assert run.returncode == 0, run.stdout[-3000:]
    assert report["status"] == "clean" and report["rungs_tried"] == [], report
    assert len(_resets(commands)) == 1  # no second reset: the Xid was answered by the first
    assert any("was already answered by a later GPU reset" in reason for reason in report["reasons"]), report["reasons"]


def test_an_xid_whose_catalog_asks_no_reset_leaves_the_idle_gpu_alone(node, collections_root):
    directory, make = node
    root = make(63)
    run, report, commands = _reset_gpu(directory, root, collections_root)
    assert run.returncode == 0, run.stdout[-3000:]
    assert report["status"] == "clean" and report["rungs_tried"] == [] and _resets(commands) == [], report
