# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The changelog speaks to users: no fragment (name or text) speaks of reviews, issue numbers or the team's rules, and
no plugin says it was added in a version after the collection's own (the release's "New Modules" list is built from
version_added). `make docs` runs the release itself (tools/changelog_release.py)."""

import glob
import importlib.util
import os
import re

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FRAGMENTS = sorted(glob.glob(os.path.join(ROOT, "changelogs", "fragments", "*.yml")))


def _release_tool():
    spec = importlib.util.spec_from_file_location("changelog_release", os.path.join(ROOT, "tools", "changelog_release.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


INSIDER = _release_tool().INSIDER


def test_the_insider_pattern_catches_what_it_is_for():
    for text in ("(issue 18 review)", "review20", "(issue 8, item 6)", "fixes (#12)", "issue 17 rule 8", "Review found"):
        assert INSIDER.search(text), text
    for text in ("protect_users", "Xid 79", "the rules of docs/safety.md", "an issue with the driver"):
        assert not INSIDER.search(text), text


def test_fragment_names_say_what_changed():
    assert FRAGMENTS
    names = [os.path.basename(path) for path in FRAGMENTS]
    assert [name for name in names if INSIDER.search(name.replace("-", " ")) or re.match(r"fix-[a-z]-", name)] == []


def test_fragment_texts_speak_to_users():
    found = []
    for path in FRAGMENTS:
        with open(path) as handle:
            for section, items in (yaml.safe_load(handle) or {}).items():
                for item in [items] if isinstance(items, str) else items:
                    found += ["%s %s: %r" % (os.path.basename(path), section, match.group(0)) for match in INSIDER.finditer(item)]
    assert found == []


def _version(text):
    return tuple(int(part) for part in str(text).split("."))


def test_nothing_was_added_after_the_collection_version():
    with open(os.path.join(ROOT, "galaxy.yml")) as handle:
        version = _version(yaml.safe_load(handle)["version"])
    later = []
    for path in glob.glob(os.path.join(ROOT, "plugins", "**", "*.*"), recursive=True) + glob.glob(
            os.path.join(ROOT, "extensions", "**", "*.*"), recursive=True):
        if path.endswith((".py", ".yml", ".yaml")):
            with open(path) as handle:
                later += ["%s: %s" % (os.path.relpath(path, ROOT), found) for found in
                          re.findall(r"version_added:\s*['\"]?([\d.]+)", handle.read()) if _version(found) > version]
    assert later == []


TOOL = _release_tool()


def _entries():
    return TOOL.fragment_entries()


def test_the_first_release_lists_features_not_fixes():
    with open(os.path.join(ROOT, "changelogs", "changelog.yaml")) as handle:
        releases = (yaml.safe_load(handle) or {}).get("releases") or {}
    assert TOOL.fixes_in_a_first_release(_entries(), releases) == []
    if not releases:
        assert not set(_entries()) & set(TOOL.FIXES)


def test_a_fix_is_refused_only_before_the_first_release():
    fixes = {"minor_changes": ["gpu_kill - ends what was left behind."], "bugfixes": ["gpu_kill - a zombie is reaped."],
             "security_fixes": ["gpu_kill - never writes through a link."]}
    found = TOOL.fixes_in_a_first_release(fixes, {})
    assert [line.split(":")[0] for line in found] == ["section bugfixes", "section security_fixes"]
    assert TOOL.fixes_in_a_first_release(fixes, {"1.0.0": {"changes": {}}}) == []
    assert TOOL.fixes_in_a_first_release({"minor_changes": ["x"]}, {}) == []


def test_the_markup_pattern_catches_what_it_is_for():
    for text in ("C(gpus)", "an O(state_path) of root", "V(true)", "M(gpuops.remediation.gpu_kill)", "I(name)"):
        assert TOOL.MARKUP.search(text), text
    for text in ("``gpus``", "SIGKILL (9)", "a GPU (C+G)", "UTF-16LE (BOM)", "Xid 79 (fallen off the bus)"):
        assert not TOOL.MARKUP.search(text), text


def test_fragments_use_no_ansible_doc_markup():
    """CHANGELOG.rst is reStructuredText, which shows C(gpus) as typed: an entry writes ``gpus``."""
    found = ["%s: %r" % (section, match.group(0)) for section, items in _entries().items() for item in items
             for match in TOOL.MARKUP.finditer(item)]
    assert found == []


def test_a_changelog_galaxy_cannot_render_is_found():
    good = "Title\n=====\n\n- gpu_kill - ends ``holders`` left behind.\n- gpu_reset - resets.\n"
    assert TOOL.rst_problems(good) == []
    broken = "Title\n=====\n\n- gpu_kill - ends ``holders left behind.\n"
    assert TOOL.rst_problems(broken)
