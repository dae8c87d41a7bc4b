# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one host a run started by an event may target.

ansible-rulebook limits the playbook (or job template) to the event's meta.hosts. A name the inventory knows as a
group, or as a host and a group alike, limits the run to every host of that group: an alert whose host label names
`gpu_nodes` would walk the ladder on the whole fleet. The rulebooks pass the event's host (gpuops_event_host), and
gpu_input_check asks event_target_error before any node is touched; gpu_alert_webhook, given the inventory, asks
inventory_host_problem before it makes the event. A run an Xid event started also checks that its own policy is the
one the event's source applied (event_policy_error).
"""

from __future__ import annotations

from ansible_collections.gpuops.remediation.plugins.module_utils._xid_policy import PolicyError, parse_policy
from ansible_collections.gpuops.remediation.plugins.plugin_utils._words import plural

SHOWN = 8


def _names(hosts):
    hosts = sorted(hosts)
    return ", ".join(hosts[:SHOWN]) + (" and %d more" % (len(hosts) - SHOWN) if len(hosts) > SHOWN else "")


def inventory_host_problem(host, groups):
    """Why `host` is not one host of the inventory (`groups`: its groups, {name: [hosts]}, "all" among them), or None:
    a group's name (its limit takes the whole group), a host's and a group's alike (ambiguous), or a name it lacks."""
    groups = groups or {}
    inventory = set(groups.get("all") or [])
    group = groups.get(host)
    if group is not None and host in inventory:
        return "%r names both a host and a group of the inventory (%s: %s): ambiguous, and a limit to it takes the group" % (
            host, plural(len(group), "host"), _names(group))
    if group is not None:
        return "%r names a group of the inventory (%s: %s), not one host" % (host, plural(len(group), "host"), _names(group))
    if host not in inventory:
        return "%r is no host of the inventory" % (host,)
    return None


def event_target_error(event_host, play_hosts, groups):
    """Why a run started by an event for `event_host` must not go on, or None: it must target exactly that one host of
    the inventory, and the play exactly it. `event_host` None: the run was not started by an event."""
    if event_host is None:
        return None
    if not isinstance(event_host, str) or not event_host.strip():
        return "gpuops_event_host must name one inventory host, got %r" % (event_host,)
    problem = inventory_host_problem(event_host, groups)
    if problem:
        return ("gpuops_event_host=%s: the event would run the ladder on hosts it does not name. Nothing was done; the "
                "event's host (the alert's host label) must name one inventory host" % problem)
    targets = sorted(set(play_hosts or []))
    if targets != [event_host]:
        return ("the run started by the event for %s targets %d hosts (%s), not that one alone: its limit matched more "
                "(a pattern, or no limit at all). Nothing was done; run it limited to %s"
                % (event_host, len(targets), _names(targets), event_host))
    return None


def _decided(policy, rung):
    return "the site policy's %s" % rung if policy == "site" else "NVIDIA's catalog (no site entry)"


def event_policy_error(xid, source_policy, source_rung, run_policy):
    """Why a run an Xid event started must not go on, or None: the source decided the Xid's rung with `source_policy`
    ("site" or "catalog") as `source_rung`, and the run's own gpuops_xid_policy must decide it the same way - else the
    event asked for one rung and the walk would enter at another. `xid` None: not started by an Xid event."""
    if xid is None or xid == "":
        return None
    try:
        code = int(str(xid).strip())
    except ValueError:
        return "gpuops_event_xid must be an Xid code, got %r" % (xid,)
    try:
        policy = parse_policy(run_policy, "gpuops_xid_policy")
    except PolicyError as exc:
        return str(exc)
    run = ("site", policy[code]) if code in policy else ("catalog", None)
    source = ("site", source_rung) if source_policy == "site" else ("catalog", None)
    if run == source:
        return None
    return ("Xid %d: the event's source applied %s, but this run's gpuops_xid_policy applies %s. Nothing was done: one "
            "policy per host, the same in the source and in the run - keep gpuops_xid_policy in the inventory file given to "
            "ansible-rulebook -i, and give the source the same (docs/eda.md, \"Per-Xid policy\")"
            % (code, _decided(*source), _decided(*run)))
