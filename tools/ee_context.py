# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The execution environment's build context from this checkout (`make ee-context`): the collection's tarball as
`ansible-galaxy collection build` makes it (.build/dist/, the only one there), then `ansible-builder create` on
extensions/ee/execution-environment.yml, which copies it into the context and installs it by its path. No container
engine is needed; build the image from the context with podman or docker (docs/awx.md).

Fails, naming what differs, when the context does not hold the very tarball just built or when the definition's
galaxy requirements name another file (galaxy.yml's version changed and the definition did not)."""

import argparse
import glob
import hashlib
import os
import subprocess
import sys

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.dirname(sys.executable)
DEFINITION = os.path.join("extensions", "ee", "execution-environment.yml")
IN_IMAGE = "/build/collections/"


def digest(path):
    with open(path, "rb") as handle:
        return hashlib.sha256(handle.read()).hexdigest()


def build_tarball(dist):
    with open(os.path.join(ROOT, "galaxy.yml")) as handle:
        galaxy = yaml.safe_load(handle)
    prefix = "%s-%s-" % (galaxy["namespace"], galaxy["name"])
    for stale in glob.glob(os.path.join(dist, prefix + "*.tar.gz")):
        os.unlink(stale)
    subprocess.run([os.path.join(BIN, "ansible-galaxy"), "collection", "build", "--force", "--output-path", dist, "."],
                   cwd=ROOT, check=True, stdout=subprocess.DEVNULL, timeout=600)
    return os.path.join(dist, "%s%s.tar.gz" % (prefix, galaxy["version"]))


def problems(context, tarball):
    """What is wrong with the context written for this tarball; empty when the image would install it."""
    found = []
    name = os.path.basename(tarball)
    copied = os.path.join(context, "_build", "collections", name)
    if not os.path.isfile(copied):
        found.append("the context has no _build/collections/%s" % name)
    elif digest(copied) != digest(tarball):
        found.append("the context's %s is not the tarball just built" % name)
    with open(os.path.join(context, "_build", "requirements.yml")) as handle:
        named = [entry["name"] for entry in yaml.safe_load(handle)["collections"] if entry.get("type") == "file"]
    if named != [IN_IMAGE + name]:
        found.append("%s's galaxy requirements install %s, not %s%s" % (DEFINITION, named, IN_IMAGE, name))
    return found


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--context", default=os.path.join(ROOT, ".build", "ee"), help="where the build context goes")
    args = parser.parse_args(argv)
    # The definition's additional_build_files takes it from here (a path relative to the definition).
    dist = os.path.join(ROOT, ".build", "dist")
    os.makedirs(dist, exist_ok=True)
    tarball = build_tarball(dist)
    subprocess.run([os.path.join(BIN, "ansible-builder"), "create", "-f", DEFINITION, "-c", args.context,
                    "--output-filename", "Containerfile"], cwd=ROOT, check=True, timeout=600)
    found = problems(args.context, tarball)
    for line in found:
        print("ee-context: " + line, file=sys.stderr)
    if not found:
        print("ee-context: %s holds %s (sha256 %s)" % (args.context, os.path.basename(tarball), digest(tarball)[:12]))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
