# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The protect list against the run: a gpu_reclaim_protect_names entry that stands for no GPU holder of any host of the
run protected nobody (a typo: "trian-worker" leaves train-worker-3 unprotected). Protect lists are fleet-wide, so it is
a warning, said once in the run's report with the closest holder name, never an error."""

from __future__ import annotations

import difflib

from ansible_collections.gpuops.remediation.plugins.module_utils._gpu_names import first_name_match, process_names

OPTION = "gpu_reclaim_protect_names"


def _holder_names(entries):
    names = set()
    for entry in entries:
        for holder in entry.get("held_by") or []:
            names |= process_names(holder.get("name"), [holder.get("command") or ""])
    return names


def protect_warnings(entries, protect_names):
    """One warning per protect_names entry no holder of any host goes by, naming the closest name there is."""
    names = _holder_names(entries)
    warnings = []
    for entry in protect_names or ():
        if not isinstance(entry, str) or first_name_match(names, [entry]):
            continue
        close = difflib.get_close_matches(entry, sorted(names), n=1, cutoff=0.6)
        warnings.append("%s: %r matches no process holding a GPU on any host of this run%s" % (
            OPTION, entry, "; did you mean %r?" % close[0] if close else ""))
    return warnings
