# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A reset that failed answers no Xid, whatever nvidia-smi's exit code says.

The real reset_gpu.yml (ansible-playbook in a child) against a simulated node whose idle GPU has a fresh Xid 119; its
nvidia-smi answers the reset with the words of a real failure (the capture of NVIDIA/NVSentinel#1690, "The following
GPUs could not be reset: ... In use by another client") and exit 0. The run reports the reset failed; the node's
journal holds no reset that answers the Xid, no remediation line reaches syslog (the EDA sources' answer), and the next
run still takes the reset. (Before, the journal said ok from the exit code: the walk, finding its Xid "answered", stopped
there instead of taking the next rung, and the next run left the GPU alone.)"""

import os
import sys

import pytest

from ansible_collections.gpuops.remediation.plugins.module_utils.journal._evidence import completed_resets
from ansible_collections.gpuops.remediation.plugins.module_utils.journal._reader import read_journal
from ansible_collections.gpuops.remediation.tests.unit.helpers.reset_run import idle_xid_nodes, reset_gpu

WRAPPER = """#!%(python)s
import os, sys
if "--gpu-reset" in sys.argv:
    sys.stdout.write("The following GPUs could not be reset:\\n  GPU 00000000:18:00.0: In use by another client\\n\\n"
                     "1 device is currently being used by one or more other processes. Please first kill all processes "
                     "using this device and all compute applications running in the system.\\n")
    sys.exit(0)
os.execv(%(real)r, [%(real)r] + sys.argv[1:])
"""


@pytest.fixture
def node():
    with idle_xid_nodes() as made:
        yield made


def test_a_reset_whose_output_says_it_failed_answers_nothing_even_with_exit_0(node, collections_root):
    directory, make = node
    root = make(119)
    tool = os.path.join(root, "bin", "nvidia-smi")
    os.rename(tool, tool + ".sim")
    with open(tool, "w") as handle:
        handle.write(WRAPPER % {"python": sys.executable, "real": tool + ".sim"})
    os.chmod(tool, 0o755)

    for number in range(2):
        # The reset rung at most: a reload would answer the Xid (rightly) and hide whether the failed reset did.
        run, report, _commands = reset_gpu(directory, root, collections_root, extra=("-e", "gpu_reclaim_max_rung=reset"))
        assert report is not None, run.stdout[-3000:]
        assert report["status"] != "fixed" and [step["rung"] for step in report["rungs_tried"]] == ["reset"], (number, report)
        assert report["rungs_tried"][0].get("failed") and "In use by another client" in report["rungs_tried"][0]["msg"], (number, report)
        assert not any("already answered" in reason for reason in report["reasons"]), report["reasons"]
    assert completed_resets(read_journal(os.path.join(root, "var", "lib", "gpuops", "journal.jsonl"))) == []
    syslog = os.path.join(root, "var", "log", "syslog")
    if os.path.exists(syslog):
        with open(syslog) as handle:
            assert "gpuops-remediation" not in handle.read()
