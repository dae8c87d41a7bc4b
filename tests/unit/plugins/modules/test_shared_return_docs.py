# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The return keys that every acting module gets from _action.Remediation are documented alike in each.

ansible-core merges doc fragments into DOCUMENTATION only, never into RETURN, so each module carries its own copy of
these keys; this test keeps the copies from drifting apart.
"""

from __future__ import annotations

import ast
import os

import pytest
import yaml

MODULES_DIR = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "plugins", "modules")
# (modules, the return keys they share): the Linux acting modules (_action.Remediation), the Windows ones (_node_journal).
SHARED = (
    (("gpu_kill", "gpu_reset", "nvidia_driver_reload", "gpu_graphics_restart"),
     ("snapshot_after", "interrupted_actions", "restored_target", "restored_units", "journal")),
    (("win_gpu_reset", "wsl_shutdown"), ("interrupted_actions", "simulated")),
)
CASES = [(modules, key) for modules, keys in SHARED for key in keys]


def _return_doc(module):
    with open(os.path.join(MODULES_DIR, module + ".py"), encoding="utf-8") as handle:
        tree = ast.parse(handle.read())
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "RETURN":
            return yaml.safe_load(node.value.value)
    raise AssertionError("%s has no RETURN" % module)


def _without_returned(doc):
    return None if doc is None else dict((name, value) for name, value in doc.items() if name != "returned")


@pytest.mark.parametrize("modules, key", CASES)
def test_a_shared_return_key_reads_the_same_in_every_acting_module(modules, key):
    # When it is returned may differ (a failed reset still returns the node after it); what it is may not.
    docs = dict((module, _without_returned(_return_doc(module).get(key))) for module in modules)
    missing = [module for module, doc in docs.items() if doc is None]
    assert not missing, "%s does not document %s" % (", ".join(missing), key)
    reference = docs[modules[0]]
    differing = [module for module, doc in docs.items() if doc != reference]
    assert not differing, "%s documents %s unlike %s" % (", ".join(differing), key, modules[0])
