# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""_payload_imports.compile_each_file_once: in a real zip on sys.path, as AnsiballZ runs a module, each file is
compiled once and runs as before; imported from files it changes nothing; every node module calls it before it
imports the rest of the collection. Each case runs in a fresh interpreter (zipimport is process-wide)."""

from __future__ import annotations

import ast
import json
import os
import sys
import zipfile

import pytest

from ansible_collections.gpuops.remediation.tests.unit.helpers import bounded

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
PACKAGE = "ansible_collections/gpuops/remediation/plugins/module_utils"
SOURCE = os.path.join(ROOT, "plugins", "module_utils", "_payload_imports.py")
IMPORT = "ansible_collections.gpuops.remediation.plugins.module_utils._payload_imports"

# Counts every compile zipimport makes, by file, then imports sample_a (which imports sample_b) and says what ran.
PROBE = r"""
import json, sys, zipimport
sys.path.insert(0, sys.argv[1])
compiled = {}
original = zipimport._compile_source
def counting(pathname, source):
    name = pathname.rsplit("/", 1)[-1]
    compiled[name] = compiled.get(name, 0) + 1
    return original(pathname, source)
zipimport._compile_source = counting
applies = None
if sys.argv[2] == "call":
    from ansible_collections.gpuops.remediation.plugins.module_utils._payload_imports import compile_each_file_once
    applies = compile_each_file_once()
    again = compile_each_file_once()  # a second call wraps nothing twice
from ansible_collections.gpuops.remediation.plugins.module_utils import sample_a
print(json.dumps({"applies": applies, "compiled": compiled, "answer": sample_a.answer(), "file": sample_a.__file__,
                  "wrapped": getattr(zipimport._get_module_code, "compiles_once", False)}))
"""


def _payload(tmp_path):
    """A zip laid out as AnsiballZ lays out a collection module's payload, with the real _payload_imports.py."""
    path = str(tmp_path / "payload.zip")
    with zipfile.ZipFile(path, "w") as payload:
        parts = PACKAGE.split("/")
        for depth in range(1, len(parts) + 1):
            payload.writestr("/".join(parts[:depth]) + "/__init__.py", "")
        payload.write(SOURCE, PACKAGE + "/_payload_imports.py")
        payload.writestr(PACKAGE + "/sample_b.py", "def base():\n    return 40\n")
        sample_a = "from %s.sample_b import base\n\n\ndef answer():\n    return base() + 2\n" % PACKAGE.replace("/", ".")
        payload.writestr(PACKAGE + "/sample_a.py", sample_a)
    return path


def _probe(zip_path, mode):
    run = bounded.run([sys.executable, "-c", PROBE, zip_path, mode], "the import probe", capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


def test_each_file_of_a_payload_is_compiled_once(tmp_path):
    result = _probe(_payload(tmp_path), "call")
    assert result["applies"] is True
    assert result["wrapped"] is True
    assert result["answer"] == 42  # the modules run as before
    assert result["compiled"]["sample_a.py"] == 1
    assert result["compiled"]["sample_b.py"] == 1
    assert result["file"].endswith("payload.zip/" + PACKAGE + "/sample_a.py")  # __file__ as zipimport names it


def test_zipimport_alone_compiles_each_file_twice(tmp_path):
    # The cost the call takes out, on this interpreter: without it, the same payload's files are compiled twice.
    result = _probe(_payload(tmp_path), "none")
    assert result["wrapped"] is False
    assert result["answer"] == 42
    assert result["compiled"]["sample_a.py"] == 2
    assert result["compiled"]["sample_b.py"] == 2


def test_imported_from_files_it_changes_nothing():
    code = ("import json, zipimport\nbefore = zipimport._get_module_code\n"
            "from %s import compile_each_file_once\n"
            "print(json.dumps([compile_each_file_once(), zipimport._get_module_code is before]))" % IMPORT)
    run = bounded.run([sys.executable, "-c", code], "the import from files", capture_output=True, text=True,
                      env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout) == [False, True]


def _collection_imports(tree):
    """The module's top-level statements from its first import of the collection on: ('import', module) or ('call', name)."""
    steps = []
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("ansible_collections.gpuops.remediation."):
            steps.append(("import", node.module))
        elif steps and isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Name):
            steps.append(("call", node.value.func.id))
    return steps


def _node_modules():
    """The modules that import the collection's module_utils (the others run through an action plugin, or PowerShell)."""
    modules = os.path.join(ROOT, "plugins", "modules")
    found = []
    for name in sorted(os.listdir(modules)):
        if name.endswith(".py"):
            with open(os.path.join(modules, name)) as handle:
                if "from ansible_collections.gpuops" in handle.read():
                    found.append(name)
    return found


NODE_MODULES = _node_modules()


def test_the_snapshot_and_every_rung_module_are_among_them():
    assert {"gpu_holders_info.py", "gpu_watch.py", "gpu_kill.py", "gpu_reset.py", "nvidia_driver_reload.py",
            "gpu_graphics_restart.py", "gpu_health_check.py"} <= set(NODE_MODULES)


@pytest.mark.parametrize("name", NODE_MODULES)
def test_every_node_module_calls_it_before_its_other_collection_imports(name):
    with open(os.path.join(ROOT, "plugins", "modules", name)) as handle:
        steps = _collection_imports(ast.parse(handle.read()))
    assert steps[:2] == [("import", IMPORT), ("call", "compile_each_file_once")], steps[:3]
