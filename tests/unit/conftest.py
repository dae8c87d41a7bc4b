"""Make ansible_collections.gpuops.remediation importable from the checkout (make collection links it)."""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COLLECTIONS = os.path.join(ROOT, ".collections")
if not os.path.isdir(os.path.join(COLLECTIONS, "ansible_collections", "gpuops", "remediation")):
    raise RuntimeError("run 'make collection' first: %s is missing" % COLLECTIONS)
sys.path.insert(0, COLLECTIONS)

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
