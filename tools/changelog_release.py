# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The release's changelog as `antsibull-changelog release` makes it from changelogs/fragments (make docs): in a copy
of the checkout's files, so that the fragments stay; the CHANGELOG.rst it writes is left in .build/changelog/.

Fails when the release did not take every fragment's entries, when what it wrote speaks of reviews or issue numbers
instead of what a user sees or shows ansible-doc markup (C(...), O(...)) as typed, when it is not reStructuredText that
docutils reads without a warning (Galaxy renders it), or when a first release lists fixes; prints how many entries each
section lists."""

import glob
import io
import os
import re
import shutil
import subprocess
import sys
import tempfile

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.dirname(sys.executable)
OUT = os.path.join(ROOT, ".build", "changelog")
# Words of the team's own process, not of a user: "review18", "issue 8", "(#12)", "rule 5".
INSIDER = re.compile(r"\breview\w*|\bissue\s*\d+|\(#\d+\)|\brules?\s+\d+", re.I)
# ansible-doc's markup, which CHANGELOG.rst shows as typed: C(gpus), O(state_path), V(true), M(gpuops.remediation.gpu_kill).
MARKUP = re.compile(r"\b[CIMOV]\([^()\s]")
FIXES = ("bugfixes", "security_fixes")


def fragment_entries():
    """Every entry of every fragment, by section."""
    entries = {}
    for path in sorted(glob.glob(os.path.join(ROOT, "changelogs", "fragments", "*.yml"))):
        with open(path) as handle:
            for section, items in (yaml.safe_load(handle) or {}).items():
                entries.setdefault(section, []).extend([items] if isinstance(items, str) else items)
    return entries


def fixes_in_a_first_release(entries, releases):
    """A first release fixes nothing: no earlier release had the behaviour a fix would change, so what a fragment
    corrects before it is what the release does, said under minor_changes. After the first release, fixes are fixes."""
    if releases:
        return []
    return ["section %s: %d entries in the first release, which has nothing released to fix (say what the collection does, "
            "under minor_changes)" % (section, len(entries[section])) for section in FIXES if entries.get(section)]


def rst_problems(text):
    """What docutils warns of in the text (an unclosed ``literal``, a broken list), one line each."""
    import docutils.core  # antsibull-changelog's own dependency, there wherever the release runs
    stream = io.StringIO()
    docutils.core.publish_doctree(text, settings_overrides={"warning_stream": stream, "report_level": 2, "halt_level": 5})
    return [line for line in stream.getvalue().splitlines() if line.strip()]


def released_before():
    with open(os.path.join(ROOT, "changelogs", "changelog.yaml")) as handle:
        return (yaml.safe_load(handle) or {}).get("releases") or {}


def copy_checkout(dest):
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, check=True,
                            capture_output=True, timeout=120).stdout.decode().split("\0")
    for name in filter(None, listed):
        source = os.path.join(ROOT, name)
        if os.path.isfile(source) and not os.path.islink(source):
            os.makedirs(os.path.join(dest, os.path.dirname(name)), exist_ok=True)
            shutil.copy2(source, os.path.join(dest, name))


def main():
    with open(os.path.join(ROOT, "galaxy.yml")) as handle:
        version = yaml.safe_load(handle)["version"]
    entries = fragment_entries()
    first_release_fixes = fixes_in_a_first_release(entries, released_before())
    with tempfile.TemporaryDirectory(prefix="gpuops-changelog-") as scratch:
        collection = os.path.join(scratch, "ansible_collections", "gpuops", "remediation")
        copy_checkout(collection)
        subprocess.run([os.path.join(BIN, "antsibull-changelog"), "release", "--version", version,
                        "--ansible-doc-bin", os.path.join(BIN, "ansible-doc")],
                       cwd=collection, check=True, timeout=600)
        os.makedirs(OUT, exist_ok=True)
        shutil.copy2(os.path.join(collection, "CHANGELOG.rst"), os.path.join(OUT, "CHANGELOG.rst"))
        with open(os.path.join(collection, "changelogs", "changelog.yaml")) as handle:
            released = yaml.safe_load(handle)["releases"][version]["changes"]
    with open(os.path.join(OUT, "CHANGELOG.rst")) as handle:
        text = handle.read()
    found = ["section %s: %d entries in the fragments, %d in the release" % (section, len(items), len(
        [released[section]] if isinstance(released.get(section), str) else released.get(section, [])))
        for section, items in entries.items() if section != "trivial"
        and len(items) != len([released[section]] if isinstance(released.get(section), str) else released.get(section, []))]
    found += ["CHANGELOG.rst says %r" % match.group(0) for match in INSIDER.finditer(text)]
    found += ["CHANGELOG.rst shows ansible-doc markup as typed: %r" % match.group(0) for match in MARKUP.finditer(text)]
    found += ["CHANGELOG.rst is not clean reStructuredText: %s" % line for line in rst_problems(text)]
    found += first_release_fixes
    if "v%s" % version not in text:
        found.append("CHANGELOG.rst has no v%s section" % version)
    for line in found:
        print("changelog: " + line, file=sys.stderr)
    if found:
        return 1
    counts = ", ".join("%s %d" % (section, len(items)) for section, items in sorted(entries.items()) if section != "trivial")
    print("changelog: v%s written to %s (%s)" % (version, os.path.relpath(os.path.join(OUT, "CHANGELOG.rst"), ROOT), counts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
