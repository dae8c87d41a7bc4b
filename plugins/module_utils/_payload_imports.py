# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Each file of a module's AnsiballZ payload compiled once on the node, not twice.

Ansible runs a module on the node from a zip file on sys.path, which Python's zipimport loads. zipimport keeps no
bytecode and, to find a file (get_filename) and then to run it (get_code), compiles the source twice: a fifth of
what a snapshot costs the node beyond ansible.builtin.ping. compile_each_file_once(), called by a module before it
imports the rest of the collection, keeps the code object of the first compile until the second asks for it.
It changes nothing outside a payload (a module imported from files, as on the controller and in the unit tests),
and nothing where zipimport has no such function (another Python): there it leaves zipimport as it is.
"""

from __future__ import annotations

import zipimport


def _compiled_once(get_module_code):
    """get_module_code (zipimport's own) that hands the code object of each file's first compile to its next call."""
    kept = {}

    def get_module_code_once(importer, fullname, *rest):
        key = (importer.archive, importer.prefix, fullname) + rest
        found = kept.pop(key, None)
        if found is None:
            found = kept[key] = get_module_code(importer, fullname, *rest)
        return found

    get_module_code_once.compiles_once = True
    return get_module_code_once


def compile_each_file_once():
    """From now on, zipimport compiles each file of this payload once; a no-op outside a payload. Returns whether it
    applies (for the tests)."""
    if not isinstance(__spec__.loader, zipimport.zipimporter):
        return False
    original = getattr(zipimport, "_get_module_code", None)
    if original is None:
        return False
    if not getattr(original, "compiles_once", False):
        zipimport._get_module_code = _compiled_once(original)
    return True
