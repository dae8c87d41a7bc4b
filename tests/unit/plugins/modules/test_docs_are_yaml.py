# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every plugin's DOCUMENTATION, EXAMPLES and RETURN is YAML, so that a ': ' slipped into a plain scalar fails here, in
the unit tests every change runs, and not only in ansible-test's validate-modules."""

from __future__ import annotations

import ast
import glob
import os

import pytest
import yaml

ROOT = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..")
PLUGIN_FILES = sorted(
    path for pattern in ("plugins/*/*.py", "extensions/eda/plugins/event_source/*.py")
    for path in glob.glob(os.path.join(ROOT, pattern))
    if not os.path.basename(path).startswith("_") and "/module_utils/" not in path and "/plugin_utils/" not in path
)
DOC_NAMES = ("DOCUMENTATION", "EXAMPLES", "RETURN")


def doc_strings(path):
    with open(path, encoding="utf-8") as handle:
        tree = ast.parse(handle.read())
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and getattr(node.targets[0], "id", None) in DOC_NAMES \
                and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            yield node.targets[0].id, node.value.value


def test_the_plugins_with_docs_are_found():
    documented = [path for path in PLUGIN_FILES if any(name == "DOCUMENTATION" for name, dummy in doc_strings(path))]
    assert len(documented) >= 20


@pytest.mark.parametrize("path", PLUGIN_FILES, ids=lambda path: os.path.relpath(path, ROOT))
def test_every_doc_string_is_yaml(path):
    for name, text in doc_strings(path):
        try:
            yaml.safe_load(text)
        except yaml.YAMLError as error:
            pytest.fail("%s of %s is not YAML: %s" % (name, os.path.relpath(path, ROOT), error))


@pytest.mark.parametrize("path", sorted(glob.glob(os.path.join(ROOT, "plugins", "filter", "*.yml"))),
                         ids=os.path.basename)
def test_every_filter_doc_is_yaml_with_its_three_parts(path):
    with open(path, encoding="utf-8") as handle:
        doc = yaml.safe_load(handle)
    assert set(DOC_NAMES) <= set(doc), "%s lacks %s" % (path, sorted(set(DOC_NAMES) - set(doc)))
