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
