# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Put the collections this one uses next to it, taken out of the `ansible` package on PyPI.

Galaxy is not reachable from every machine that builds this collection; PyPI is. The `ansible` package carries
the collections of its release, so its wheel (downloaded once, into pip's cache) is their source: only the
named collections' folders are extracted, into <dest>/ansible_collections/<namespace>/<name>.

Run: python tools/vendor_collections.py --dest .collections --ansible 12.3.0 kubernetes.core
"""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile


def _wheel(version, cache_dir):
    pattern = os.path.join(cache_dir, "ansible-%s-py3-none-any.whl" % version)
    if not glob.glob(pattern):
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check", "--no-deps",
                        "--dest", cache_dir, "ansible==%s" % version], check=True)
    found = glob.glob(pattern)
    if not found:
        raise SystemExit("vendor_collections: no ansible %s wheel in %s after pip download" % (version, cache_dir))
    return found[0]


def _extract(wheel, names, dest):
    prefixes = dict(("ansible_collections/%s/%s/" % tuple(name.split(".", 1)), name) for name in names)
    staging = tempfile.mkdtemp(dir=dest, prefix=".vendor-")
    try:
        with zipfile.ZipFile(wheel) as archive:
            members = [m for m in archive.namelist() if any(m.startswith(p) for p in prefixes)]
            missing = [name for prefix, name in prefixes.items() if not any(m.startswith(prefix) for m in members)]
            if missing:
                raise SystemExit("vendor_collections: %s not in %s" % (", ".join(missing), os.path.basename(wheel)))
            archive.extractall(staging, members)
        for prefix in prefixes:
            target = os.path.join(dest, prefix)
            if os.path.isdir(target):
                shutil.rmtree(target)
            os.makedirs(os.path.dirname(target.rstrip("/")), exist_ok=True)
            os.rename(os.path.join(staging, prefix), target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dest", required=True, help="a collections path (the folder that holds ansible_collections/)")
    parser.add_argument("--ansible", required=True, help="the version of the ansible package to take them from")
    parser.add_argument("--cache", default=os.path.join(os.path.expanduser("~"), ".cache", "gpuops", "wheels"),
                        help="where the wheel is kept between runs (default ~/.cache/gpuops/wheels)")
    parser.add_argument("collections", nargs="+", help="namespace.name of each collection")
    args = parser.parse_args(argv)
    bad = [name for name in args.collections if name.count(".") != 1]
    if bad:
        parser.error("collections: %s is not namespace.name" % ", ".join(bad))
    os.makedirs(args.cache, exist_ok=True)
    os.makedirs(os.path.join(args.dest, "ansible_collections"), exist_ok=True)
    _extract(_wheel(args.ansible, args.cache), args.collections, os.path.abspath(args.dest))
    print("vendor_collections: %s from ansible %s into %s" % (", ".join(args.collections), args.ansible, args.dest))
    return 0


if __name__ == "__main__":
    sys.exit(main())
