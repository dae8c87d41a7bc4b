# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The playbooks' input check, on the controller: every variable a playbook's roles declare
(meta/argument_specs.yml) and the playbooks' own (gpuops_*), checked once before any node is touched.

What it accepts is what operators send: yes/no as booleans or as the strings -e and AWX surveys give ("true",
"no", "1", ...), numbers as strings; lists and mappings must be lists and mappings (-e '{"NAME": [...]}')."""

from __future__ import annotations

import os
import re

import yaml

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.gpuops.remediation.plugins.module_utils._option_check import PLAYBOOK_VARIABLE, kind_error
from ansible_collections.gpuops.remediation.plugins.module_utils.scheduler._slurm import control_character
from ansible_collections.gpuops.remediation.plugins.module_utils.watch._watch_ranges import RANGED_OPTIONS, out_of_range

COLLECTION_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MAX_HOSTS_PER_BATCH = 1000000

# The playbooks' own variables (each playbook's header documents them).
PLAYBOOK_OPTIONS = {
    "gpuops_hosts": {"type": "raw"},
    "gpuops_serial": {"type": "raw"},
    "gpuops_max_fail_percentage": {"type": "raw"},
    "gpuops_dry_run": {"type": "bool"},
    "gpuops_environment": {"type": "dict"},
    # The event's one host, passed by the rulebooks (plugin_utils/eda/_event_target.py).
    "gpuops_event_host": {"type": "str"},
    # What the event's source decided of an Xid (its code, "site" or "catalog", the rung): the run's policy must agree.
    "gpuops_event_xid": {"type": "raw"},
    "gpuops_event_policy": {"type": "str"},
    "gpuops_event_rung": {"type": "str"},
}


def role_options(roles, entry_point="main", roles_dir=None):
    """{variable: its spec} for the entry point of each role, as its meta/argument_specs.yml declares."""
    options = {}
    for role in roles:
        path = os.path.join(roles_dir or os.path.join(COLLECTION_ROOT, "roles"), role, "meta", "argument_specs.yml")
        with open(path, encoding="utf-8") as handle:
            specs = yaml.safe_load(handle)["argument_specs"]
        options.update(specs[entry_point if entry_point in specs else "main"]["options"])
    return options


def _percent(value):
    whole = not isinstance(value, bool) and re.fullmatch(r"-?[0-9]+", str(value).strip()) is not None
    return None if whole and 0 <= int(value) <= 100 else "0..100"


def _serial(value):
    text = str(value).strip()
    match = re.fullmatch(r"([0-9]+)(%?)", text) if not isinstance(value, bool) else None
    if match and 1 <= int(match.group(1)) <= (100 if match.group(2) else MAX_HOSTS_PER_BATCH):
        return None
    return "hosts per batch: N >= 1, or a percentage 1%..100%"


def _windows_journal_path(value):
    # only a run that sets a Windows journal path checks it
    from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.node._node_journal import (  # pylint: disable=import-outside-toplevel
        checked_path as checked_windows_journal_path,
    )
    try:
        checked_windows_journal_path(value)
    except ValueError:
        return "an absolute Windows path of a file, like C:\\ProgramData\\gpuops\\journal.jsonl"
    return None


def _one_line(value):
    """A text that goes into a Slurm reason, a Kubernetes annotation or a reboot message whole: slurm_drain refuses a line
    break or control character in its marker only at the drain, after the node was inspected."""
    found = control_character(str(value))
    if found:
        return "one line without a line break or control character; found %s" % found
    return None if str(value).strip() else "a non-empty text"


def _watch_range(option):
    def check(value):
        return out_of_range(option, float(value))
    return check


# Values the types let through but the run cannot use: {variable: check(value) -> what it must be, or None}.
VALUE_RULES = {
    "gpuops_max_fail_percentage": _percent,
    "gpuops_serial": _serial,
    "gpu_remediate_max_destructive_percent": _percent,
    "gpu_reclaim_windows_journal_path": _windows_journal_path,
    "gpu_reclaim_drain_reason": _one_line,
}
VALUE_RULES.update(("gpu_watch_" + option, _watch_range(option)) for option in RANGED_OPTIONS)


def input_errors(values, options):
    """One message per wrong variable of `values` (those `options` declares), each naming it with its value and what
    it must be; empty when every one is right."""
    errors, named = [], set()
    for name in sorted(values):
        spec = options.get(name)
        if spec is None:
            continue
        value = values[name]
        if value is None and not spec.get("required"):
            continue  # no answer (AWX's empty survey answer, ansible/awx#16205): the default applies
        error = kind_error(name, value, spec.get("type", "str"), PLAYBOOK_VARIABLE, shown=_as_written(value))
        if error is None and name in VALUE_RULES and _kind_error_free(spec, value):
            must_be = VALUE_RULES[name](value)
            error = "%s=%s (%s)" % (name, _as_written(value), must_be) if must_be else None
        if error:
            errors.append(error)
            named.add(name)
    rest = {name: values[name] for name in values if name in options and name not in named
            and (values[name] is not None or options[name].get("required"))}
    rest_spec = {name: _validator_spec(options[name]) for name in rest}
    result = ArgumentSpecValidator(rest_spec).validate(rest)
    errors.extend(result.error_messages)
    return errors


def _as_written(value):
    """The value as the operator wrote it, on one line: a text with a line break or control character as repr() shows it."""
    return repr(value) if isinstance(value, str) and control_character(value) else value


def _kind_error_free(spec, value):
    """The type's own conversion accepts it (a range is checked only on a value of the right type)."""
    if spec.get("type") in ("int", "float"):
        try:
            float(value)
        except (TypeError, ValueError):
            return False
    return True


def _validator_spec(spec):
    """The keys of an argument spec entry ArgumentSpecValidator knows (descriptions and defaults left out: a
    default is a template the roles render, not a value to check)."""
    return {key: spec[key] for key in ("type", "elements", "choices", "options", "required") if key in spec}
