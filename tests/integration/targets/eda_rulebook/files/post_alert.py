# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""POST an Alertmanager-shaped body to the gpu_alert_webhook source; print the HTTP status.

    post_alert.py URL SECRET BODY_FILE signed|unsigned|stale|wrong_secret
"""
import hashlib
import hmac
import sys
import time
import urllib.error
import urllib.request


def signature(secret, stamp, body):
    return "sha256=" + hmac.new(secret.encode(), stamp.encode() + b"." + body, hashlib.sha256).hexdigest()


def main(url, secret, body_file, how):
    with open(body_file, "rb") as handle:
        body = handle.read()
    stamp = str(int(time.time()) - (3600 if how == "stale" else 0))
    headers = {"Content-Type": "application/json"}
    if how != "unsigned":
        headers["X-Gpuops-Timestamp"] = stamp
        headers["X-Gpuops-Signature"] = signature("not the secret" if how == "wrong_secret" else secret, stamp, body)
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            print(answer.status)
    except urllib.error.HTTPError as exc:
        print(exc.code)


if __name__ == "__main__":
    main(*sys.argv[1:5])
