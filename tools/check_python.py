"""Fail early, and clearly, when the python3 on PATH cannot build the project's virtual environment."""
import sys

if sys.version_info < (3, 11):
    sys.exit("gpuops.remediation needs Python 3.11 or newer to build .venv; found %s" % sys.version.split()[0])
try:
    import venv  # noqa: F401  pylint: disable=unused-import
    import ensurepip  # noqa: F401  pylint: disable=unused-import
except ImportError:
    sys.exit("python3 lacks the venv module (on Debian: apt install python3-venv)")
