# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The playbooks' input check, on the controller: every variable a playbook's roles declare
(meta/argument_specs.yml) and the playbooks' own (gpuops_*), checked once before any node is touched.

What it accepts is what operators send: yes/no as booleans or as the strings -e and AWX surveys give ("true",
"no", "1", ...), numbers as strings; lists and mappings must be lists and mappings (-e '{"NAME": [...]}')."""

from __future__ import annotations

import difflib
import math
import os
import re

import yaml

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.gpuops.remediation.plugins.module_utils.kill._terminate import signal_number
from ansible_collections.gpuops.remediation.plugins.module_utils._option_check import PLAYBOOK_VARIABLE, kind_error
from ansible_collections.gpuops.remediation.plugins.module_utils._option_ranges import range_of, within
from ansible_collections.gpuops.remediation.plugins.module_utils._xid_policy import PolicyError, parse_policy
from ansible_collections.gpuops.remediation.plugins.module_utils.scheduler._slurm import control_character
from ansible_collections.gpuops.remediation.plugins.module_utils.watch._watch_ranges import RANGED_OPTIONS, out_of_range

COLLECTION_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MAX_HOSTS_PER_BATCH = 1000000
# An extra variable with one of these prefixes is meant for this collection: one it does not know is a typo.
PREFIXES = ("gpu_reclaim_", "gpu_inspect_", "gpu_remediate_", "gpu_watch_", "gpu_node_prep_", "gpuops_")

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
# Variables of the collection's prefixes read where the input check does not type them: a host's own (the simulated
# Windows node's directory, the Xid policy of group_vars) and the report the run hands AWX.
READ_ELSEWHERE = frozenset(["gpuops_windows_sim_root", "gpuops_xid_policy", "gpuops_report"])


def policy_errors(policy):
    """[why] the site's Xid policy (gpuops_xid_policy, read by the modules on each node) cannot be used, or []: checked
    here with the other inputs, so that a malformed one is refused naming the variable before any node is touched."""
    try:
        parse_policy(policy, "gpuops_xid_policy")
    except PolicyError as exc:
        return [str(exc)]
    return []


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


def _module_range(option):
    """The limit of the module option the variable feeds (module_utils/_option_ranges.py)."""
    def check(value):
        return None if within(option, float(value)) else range_of(option)
    return check


def _signals(value):
    if not value:
        return "at least one signal name (TERM, INT, KILL, ...)"
    wrong = []
    for name in value:
        try:
            signal_number(str(name))
        except (AttributeError, ValueError):
            wrong.append(str(name))
    return "signal names (TERM, INT, KILL, ...); not one: %s" % ", ".join(wrong) if wrong else None


# {role variable: the module option it feeds}: each is checked against that option's own range.
MODULE_OPTION_OF = {
    "gpu_inspect_probe_timeout": "probe_timeout",
    "gpu_reclaim_probe_timeout": "probe_timeout",
    "gpu_watch_probe_timeout": "probe_timeout",
    "gpu_inspect_kernel_log_window": "kernel_log_window",
    "gpu_reclaim_kernel_log_window": "kernel_log_window",
    "gpu_inspect_ghost_threshold_mib": "ghost_threshold_mib",
    "gpu_reclaim_ghost_threshold_mib": "ghost_threshold_mib",
    "gpu_watch_ghost_threshold_mib": "ghost_threshold_mib",
    "gpu_reclaim_kill_grace": "grace",
    "gpu_reclaim_kill_wait_timeout": "wait_timeout",
    "gpu_reclaim_lock_timeout": "lock_timeout",
    "gpu_reclaim_reload_grace": "reload_grace",
    "gpu_reclaim_health_check_timeout": "health_check_timeout",
    "gpu_reclaim_reboot_timeout": "reboot_timeout",
    "gpu_reclaim_slurm_job_timeout": "job_timeout",
    "gpu_reclaim_slurm_stale_drain_after": "stale_drain_after",
    "gpu_remediate_breaker_max_percent": "max_percent",
    "gpu_remediate_breaker_max_count": "max_count",
    "gpu_remediate_breaker_window_minutes": "window_minutes",
    "gpu_watch_webhook_timeout": "webhook_timeout",
}


def _gpu_selection(value):
    """A list of GPU selectors (index, UUID, PCI bus id, MIG instance) that the modules resolve on each node: true/false,
    an empty text or a nested value names no GPU, and would be refused only after the node was inspected."""
    if isinstance(value, list) and any(isinstance(item, bool) or not isinstance(item, (str, int)) or not str(item).strip()
                                       for item in value):
        return "a list of GPU indexes, UUIDs, PCI bus ids or MIG instances; true, false, an empty text or a nested value names no GPU"
    return None


# Values the types let through but the run cannot use: {variable: check(value) -> what it must be, or None}.
VALUE_RULES = {
    "gpuops_max_fail_percentage": _percent,
    "gpuops_serial": _serial,
    "gpu_remediate_max_destructive_percent": _percent,
    "gpu_reclaim_windows_journal_path": _windows_journal_path,
    "gpu_reclaim_drain_reason": _one_line,
    "gpu_reclaim_kill_signals": _signals,
}
VALUE_RULES.update((variable, _gpu_selection) for variable in ("gpu_inspect_gpus", "gpu_reclaim_gpus", "gpu_watch_gpus", "gpu_node_prep_gpus"))
VALUE_RULES.update(("gpu_watch_" + option, _watch_range(option)) for option in RANGED_OPTIONS)
VALUE_RULES.update((variable, _module_range(option)) for variable, option in MODULE_OPTION_OF.items())


def _closest(name, known):
    """The input of the same prefix whose rest is closest to the name's rest (the shared prefix alone makes no match)."""
    prefix = max((prefix for prefix in PREFIXES if name.startswith(prefix)), key=len)
    rests = dict((other[len(prefix):], other) for other in known if other.startswith(prefix))
    close = difflib.get_close_matches(name[len(prefix):], sorted(rests), n=1, cutoff=0.6)
    return rests[close[0]] if close else None


def unknown_variables(names, known):
    """One message per name with one of the collection's prefixes that is no input of the playbook, naming the closest
    input there is: a misspelt variable would otherwise be ignored and its default (perhaps a weaker one) used."""
    errors = []
    for name in sorted(names):
        if name.startswith(PREFIXES) and name not in known and name not in READ_ELSEWHERE:
            close = _closest(name, known)
            errors.append("%s is no input of this playbook%s" % (name, "; did you mean %s?" % close if close else ""))
    return errors


def _number_error(name, value, kind):
    """A number variable's error, naming it and its value as written (Ansible's validator would name neither: "unable to
    convert to float: <class '..._AnsibleTaggedStr'>"); None when the value is one, or the variable no number."""
    if kind in ("int", "float") and _number(value, kind) is None:
        return "%s=%s (%s)" % (name, _as_written(value), "a whole number" if kind == "int" else "a number")
    return None


def _whole(text):
    digits = text.strip()
    digits = digits[1:] if digits[:1] in ("-", "+") else digits
    return digits.isascii() and digits.isdigit()


def _number(value, kind):
    """The number a value of an int or float spec stands for, as the argument spec would convert it; None if none."""
    if isinstance(value, bool) or (kind == "int" and isinstance(value, str) and not _whole(value)):
        return None
    try:
        number = float(str(value).strip()) if isinstance(value, str) else float(value)
    except (TypeError, ValueError):
        return None
    if not math.isfinite(number):
        return None
    return number if kind == "float" or number == int(number) else None


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
        kind = spec.get("type", "str")
        error = kind_error(name, value, kind, PLAYBOOK_VARIABLE, shown=_as_written(value)) or _number_error(name, value, kind)
        if error is None and name in VALUE_RULES:
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


def _validator_spec(spec):
    """The keys of an argument spec entry ArgumentSpecValidator knows (descriptions and defaults left out: a
    default is a template the roles render, not a value to check)."""
    return {key: spec[key] for key in ("type", "elements", "choices", "options", "required") if key in spec}
