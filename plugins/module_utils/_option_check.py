# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one check of an option's kind: whether a value is of an option type (int, float, bool, str, path, list, dict),
and the error that names the option and the value as the operator wrote them. The modules (_module.GpuModule), the
playbooks' input check (plugin_utils/_inputs.py) and the event sources (plugin_utils/eda/_source_shared.py) use it.

What counts as a value of a kind depends on where the operator wrote it (`given`):
- MODULE_OPTION, a task's option: Ansible's conversions that lose nothing (a number or yes/no as text, 1 and 0 for a
  boolean, 1.0 too, 5.0 for 5, a comma-separated text for a list), none that could select the wrong process (true is no 1, a
  list is no name pattern, nan is no timeout);
- PLAYBOOK_VARIABLE, a variable from -e or an AWX survey: yes/no as text, 1 and 0; lists and mappings must be lists and
  mappings; numbers and texts are Ansible's validator's, which converts them as the roles will;
- RULEBOOK_OPTION, an event source's option: a rulebook's YAML is typed, so only a value of the kind itself.
"""

from __future__ import annotations

import math

from ansible.module_utils.parsing.convert_bool import BOOLEANS

MODULE_OPTION = "module option"
PLAYBOOK_VARIABLE = "playbook variable"
RULEBOOK_OPTION = "rulebook option"
# What a playbook variable must be, said to the operator; the kinds not named are Ansible's validator's.
MUST_BE = {"bool": "true or false", "list": "a list", "dict": "a mapping"}


def _finite_number_text(value):
    try:
        return math.isfinite(float(value))
    except (TypeError, ValueError):
        return False


def _wrong_number(kind, value, given):
    if isinstance(value, bool):
        return "a boolean is not a number"
    if isinstance(value, str):
        if given == RULEBOOK_OPTION:
            return "a text is not a number"
        return None if _finite_number_text(value.strip()) else "not a (finite) number"
    if not isinstance(value, (int, float)):
        return "not a number"
    if isinstance(value, float) and not math.isfinite(value):
        return "not a finite number"
    if kind == "int" and isinstance(value, float) and (given == RULEBOOK_OPTION or not value.is_integer()):
        return "not a whole number"
    return None


def _wrong_bool(value, given):
    if isinstance(value, bool):
        return None
    if given != RULEBOOK_OPTION:
        # 1 and 0 (a module takes 1.0 and 0.0 too, as Ansible's conversion does; the roles' YAML would not)
        numbers = (int, float) if given == MODULE_OPTION else int
        if isinstance(value, numbers) and value in (0, 1):
            return None
        if isinstance(value, str) and value.strip().lower() in BOOLEANS:
            return None
    return "not a boolean (true/false, yes/no, 1/0)"


def _wrong_text(value, given):
    if isinstance(value, (list, dict)):
        return "a %s is not a string" % type(value).__name__
    if given == RULEBOOK_OPTION and not isinstance(value, str):
        return "a %s is not a string" % type(value).__name__
    return "it holds a NUL byte" if isinstance(value, str) and "\x00" in value else None


def _wrong_list(value, given):
    if given == MODULE_OPTION:
        return None  # Ansible's own: a comma-separated text is a list; each element is checked as its own kind
    kinds = (list,) if given == RULEBOOK_OPTION else (list, tuple)
    return None if isinstance(value, kinds) else "not a list"


def wrong_kind(kind, value, given=MODULE_OPTION):
    """Why `value` is not of the option type `kind` as an option written where `given` says, or None (None too for no
    value, and for a kind that is not ours to check there)."""
    if value is None or (given == PLAYBOOK_VARIABLE and kind not in MUST_BE):
        return None
    if kind in ("int", "float"):
        return _wrong_number(kind, value, given)
    if kind == "bool":
        return _wrong_bool(value, given)
    if kind in ("str", "path"):
        return _wrong_text(value, given)
    if kind == "list":
        return _wrong_list(value, given)
    if kind == "dict":
        return None if isinstance(value, dict) else "not a mapping"
    return None


def kind_error(name, value, kind, given=MODULE_OPTION, shown=None):
    """The error for the option `name` (as the caller names it: "grace", "protect_names[1]", "gpuops_dry_run",
    "gpu_kernel_log: option throttle_seconds") whose value is not of `kind`, naming the value as the operator wrote it
    (`shown`, where the caller writes it otherwise); None when it is of that kind."""
    why = wrong_kind(kind, value, given)
    if why is None:
        return None
    if given == PLAYBOOK_VARIABLE:
        return "%s=%s (%s)" % (name, value if shown is None else shown, MUST_BE[kind])
    if given == RULEBOOK_OPTION:
        return "%s must be a %s, got %r" % (name, kind, value)
    return "%s: %r is not valid: %s" % (name, value, why)
