# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The options of the journal a Windows module keeps on the node."""

from __future__ import annotations


class ModuleDocFragment:

    # The journal options of the Windows modules that act (plugin_utils.windows.node._node_journal).
    DOCUMENTATION = r"""
options:
  journal_path:
    description:
      - The journal on the Windows host, one JSON line before and one after each action (the records of the Linux
        journal), appended through C(ansible.windows.win_powershell) with the record as a parameter and flushed to disk
        before the action goes ahead.
      - An absolute path on a drive. Defaults to C(C:\\ProgramData\\gpuops\\journal.jsonl); on a simulated node the file
        lies under its root (C(fs/C/ProgramData/gpuops/journal.jsonl)).
    type: str
  run_id:
    description:
      - An identifier written into every journal line of this run (for example the AWX job id), to trace a leak
        back to the run that acted on it.
    type: str
"""
