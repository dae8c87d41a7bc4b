# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""_linear_text.RegexOnFirstUse: the patterns of text a snapshot seldom reads (the kernel log's NVRM lines, modprobe's
errors) are compiled when first used, once, and answer as the compiled pattern does."""

from __future__ import annotations

import json
import re
import sys

from ansible_collections.gpuops.remediation.plugins.module_utils._linear_text import RegexOnFirstUse

from ansible_collections.gpuops.remediation.tests.unit.helpers import bounded


def test_compiled_once_on_first_use_and_answers_as_the_pattern():
    compiled = []

    def compile_it():
        compiled.append(1)
        return re.compile(r"^Xid \((?P<bus>[0-9a-f:.]+)\): (?P<xid>\d+)")

    lazy = RegexOnFirstUse(compile_it)
    assert not compiled
    match = lazy.match("Xid (0000:01:00): 79, GPU has fallen off the bus")
    assert match.group("bus", "xid") == ("0000:01:00", "79")
    assert lazy.search("no Xid here") is None
    assert [m.group("xid") for m in lazy.finditer("Xid (0:1): 94")] == ["94"]
    assert len(compiled) == 1
    assert lazy.pattern == compile_it().pattern


PROBE = r"""
import json, sys
from ansible_collections.gpuops.remediation.plugins.module_utils.probes import _kernel_log, _kmod
healthy = _kernel_log.parse_kernel_log("[  12.345678] usb 1-1: new high-speed USB device\n[  13.0] eth0: link up\n", now=1796032800.0)
lazy = dict((name, value) for name, value in vars(_kernel_log).items() if type(value).__name__ == "RegexOnFirstUse")
lazy.update(("_TIME_PATTERNS " + kind, pattern) for kind, pattern in _kernel_log._TIME_PATTERNS)
before = sorted(name for name, value in lazy.items() if value._pattern is not None)
xid = _kernel_log.parse_kernel_log("[  14.0] NVRM: Xid (PCI:0000:01:00): 79, pid=123, name=python, GPU has fallen off the bus.\n",
                                   now=1796032800.0)
error = _kmod.parse_modprobe_error("modprobe: FATAL: Module nvidia is in use.\n")
print(json.dumps({"healthy": healthy, "lazy_patterns": len(lazy), "compiled_by_a_healthy_log": before, "xid": [e["xid"] for e in xid],
                  "compiled_after_an_xid": _kernel_log._XID_RE._pattern is not None, "modprobe": error["reason"]}))
"""


def test_a_healthy_kernel_log_compiles_none_of_the_nvrm_patterns():
    # A fresh interpreter: in this one, other tests may have used the patterns already.
    done = bounded.run([sys.executable, "-c", PROBE], "the kernel log parser in a fresh interpreter", capture_output=True, text=True,
                       check=True, env={"PYTHONPATH": ":".join(sys.path)})
    found = json.loads(done.stdout)
    assert found["healthy"] == []
    assert found["lazy_patterns"] >= 12
    assert found["compiled_by_a_healthy_log"] == []
    assert found["xid"] == [79] and found["compiled_after_an_xid"]
    assert found["modprobe"] == "in_use"
