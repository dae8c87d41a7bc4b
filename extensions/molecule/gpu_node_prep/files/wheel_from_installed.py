# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pack an installed distribution back into a wheel, so that a test installs it with pip --no-index (no network).

usage: wheel_from_installed.py DISTRIBUTION OUTDIR -> prints the wheel's path. Only pure-Python wheels (one tag).
"""

import base64
import hashlib
import importlib.metadata
import os
import sys
import zipfile

LEFT_OUT = ("INSTALLER", "REQUESTED", "RECORD", "direct_url.json")


def record_line(arcname, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (arcname, digest, len(data))


def main(name, outdir):
    dist = importlib.metadata.distribution(name)
    tags = [line.split(":", 1)[1].strip() for line in (dist.read_text("WHEEL") or "").splitlines() if line.startswith("Tag:")]
    if len(tags) != 1 or not tags[0].endswith("-none-any"):
        sys.exit("%s is not a pure-Python wheel with one tag (tags %s)" % (name, tags))
    stem = "%s-%s" % (dist.metadata["Name"].replace("-", "_"), dist.version)
    path = os.path.join(outdir, "%s-%s.whl" % (stem, tags[0]))
    os.makedirs(outdir, exist_ok=True)
    members = [f for f in dist.files if "__pycache__" not in f.parts and f.name not in LEFT_OUT]
    records = []
    with zipfile.ZipFile(path + ".tmp", "w", zipfile.ZIP_DEFLATED) as wheel:
        for member in members:
            data = member.locate().read_bytes()
            wheel.writestr(str(member), data)
            records.append(record_line(str(member), data))
        record = "%s.dist-info/RECORD" % stem
        wheel.writestr(record, "\n".join(records + [record + ",,"]) + "\n")
    os.replace(path + ".tmp", path)
    print(path)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
