# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the three event sources of extensions/eda share: their option check, the throttle, the one host an event may
name, and the event a source puts when it cannot read what it follows.

Pure Python (no ansible-rulebook import), so that the sources' decisions are unit-tested without the engine. The
sources themselves (extensions/eda/plugins/event_source/) only read their input, call these and their own module
(_kernel_log_source, _snapshot_source, _alert_webhook_source), and put on the queue.
"""

from __future__ import annotations

import ipaddress
import os
import re
import socket

from ansible_collections.gpuops.remediation.plugins.module_utils._option_check import RULEBOOK_OPTION, kind_error
from ansible_collections.gpuops.remediation.plugins.plugin_utils.eda._event_target import inventory_host_problem


class OptionError(ValueError):
    """A source option with a bad value; the message names the source, the option and the value."""


def check_args(source, args, spec):
    """The options with their defaults, each checked against spec {name: {"type", "default", "choices", "min"}}.

    Raises OptionError naming the first unknown option or bad value; nothing is read or started before that.
    """
    args = dict(args or {})
    unknown = sorted(set(args) - set(spec))
    if unknown:
        raise OptionError("%s: unknown option %s (known: %s)" % (source, unknown[0], ", ".join(sorted(spec))))
    checked = {}
    for name, rule in spec.items():
        value = args.get(name, rule.get("default"))
        if value is None:
            checked[name] = None
            continue
        if rule["type"] == "float" and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        # a float option refuses nan (it passes every "min": asyncio.sleep(nan) returns at once, a source spinning) and inf
        wrong = kind_error("%s: option %s" % (source, name), value, rule["type"], RULEBOOK_OPTION)
        if wrong:
            raise OptionError(wrong)
        if "choices" in rule and value not in rule["choices"]:
            raise OptionError("%s: option %s must be one of %s, got %r" % (source, name, ", ".join(rule["choices"]), value))
        if "min" in rule and value < rule["min"]:
            raise OptionError("%s: option %s must be %s or more, got %r" % (source, name, rule["min"], value))
        checked[name] = value
    return checked


def default_host():
    return socket.gethostname()


class Throttle:
    """One event per key within `seconds` (a repeat of the same condition on the same host and GPU is dropped).

    It remembers at most `most_keys` keys: a key whose window has passed throttles nothing and is forgotten, and a
    flood of distinct keys (lines a file source reads may name any GPU, instance or Xid) forgets the oldest first."""

    MOST_KEYS = 10000

    def __init__(self, seconds, most_keys=MOST_KEYS):
        self.seconds = seconds
        self.most_keys = most_keys
        self._last = {}  # in the order the keys were last allowed

    def allow(self, key, now):
        last = self._last.get(key)
        if last is not None and 0 <= now - last < self.seconds:
            return False
        self._last.pop(key, None)
        self._last[key] = now
        self._forget(now)
        return True

    def remembered(self):
        return len(self._last)

    def _forget(self, now):
        while self._last:
            oldest = next(iter(self._last))
            if len(self._last) <= self.most_keys and 0 <= now - self._last[oldest] < self.seconds:
                return
            del self._last[oldest]


# ---------------------------------------------------------------- what a source cannot read

def problem_event(source, host, message):
    """The event a source puts when it cannot read what it follows (no permission, its tool missing or ended, a probe
    that failed) or an event it cannot make (an alert whose host is no one inventory host): reported, never remediated
    (rung none; the rulebooks print it). `host` None: no meta.hosts (the webhook's problems name hosts that are not)."""
    event = {"gpuops": {"type": "source_problem", "source": source, "host": host or "", "rung": "none", "message": message}}
    if host is not None:
        event["meta"] = {"hosts": host}
    return event


class Retry:
    """A failure that lasts: its report once (again only when its words change, or after a success), and the delay
    before the next try - `first`, doubled each time up to `most` - so that a source never spins on it."""

    def __init__(self, first, most=60.0):
        self.first, self.most = first, max(first, most)
        self.delay = first
        self.reported = None

    def failed(self, message):
        """(whether to report message now, seconds to wait before trying again)."""
        report = message != self.reported
        self.reported = message
        delay, self.delay = self.delay, min(self.most, self.delay * 2)
        return report, delay

    def succeeded(self):
        self.delay, self.reported = self.first, None


# One inventory host name: ansible-rulebook passes meta.hosts to the playbook as its --limit, where a pattern ("all", a
# group, "a,b", "node*", "~regex", "!x", "&x", "@file") would name other hosts. An IP address is one host too.
_HOST_NAME_RE = re.compile(r"\A[A-Za-z0-9_][A-Za-z0-9._-]*\Z")
_IMPLICIT_GROUPS = ("all", "ungrouped")


def host_problem(host):
    """Why `host` cannot be the one host an event names (its meta.hosts), or None."""
    if not isinstance(host, str) or not host:
        return "its host %r is not a host name" % (host,)
    if host in _IMPLICIT_GROUPS:
        return "its host %r is Ansible's group of every host, not one host" % host
    if _HOST_NAME_RE.match(host):
        return None
    try:
        ipaddress.ip_address(host)
        return None
    except ValueError:
        return "its host %r is not one host name (as a --limit it is a pattern that names other hosts)" % host


def inventory_groups(source, path):
    """{group: [hosts]} of the inventory ansible-rulebook runs the playbooks with ("all" among them), read with
    ansible-core's own inventory plugins (option inventory); OptionError naming the option when it has no host."""
    if not os.path.exists(path):
        raise OptionError("%s: option inventory: %s does not exist" % (source, path))
    from ansible.inventory.manager import InventoryManager
    from ansible.parsing.dataloader import DataLoader

    manager = InventoryManager(loader=DataLoader(), sources=[path])
    groups = dict((name, sorted(host.name for host in group.get_hosts())) for name, group in manager.groups.items())
    groups["all"] = sorted(manager.hosts)
    if not groups["all"]:
        raise OptionError("%s: option inventory: %s holds no host (or is no inventory ansible-core can read)" % (source, path))
    return groups


def checked_host(source, option, host, groups=None):
    """The host an option names, or OptionError naming the option and the value when it is not one host name (with
    the inventory's `groups`: not one host of the inventory - a group's name, ambiguous, or unknown)."""
    why = host_problem(host) or (inventory_host_problem(host, groups) if groups is not None else None)
    if why:
        raise OptionError("%s: option %s: %s" % (source, option, why))
    return host
