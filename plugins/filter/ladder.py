# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters that let playbooks ask the ladder's questions of plugins/plugin_utils/ladder/_ladder.py instead of answering them.

Each filter imports what it asks in its own body: Ansible finds a collection's filter by importing the files of
plugins/filter/ one after the other until one has it, in every forked worker of every task that names one, so a
top-level import here would be paid by each host's task for any filter of the collection (bench/README.md, fleet).
"""

from __future__ import annotations

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.validation import check_type_list
from ansible.module_utils.parsing.convert_bool import boolean


def _snapshot(value, filter_name):
    if not isinstance(value, Mapping) or not all(key in value for key in ("gpus", "holders", "verdict")):
        raise AnsibleFilterError("%s: the input must be a result of gpuops.remediation.gpu_holders_info, got %r" % (filter_name, type(value).__name__))
    return value


def _platform(platform, filter_name):
    """The platform's record (plugin_utils/ladder/_platform.py)."""
    from ansible_collections.gpuops.remediation.plugins.plugin_utils.ladder._platform import PLATFORMS

    if platform not in PLATFORMS:
        raise AnsibleFilterError("%s: platform must be one of %s, got %r" % (filter_name, ", ".join(PLATFORMS), platform))
    return PLATFORMS[platform]


def _end_running_jobs(value, filter_name):
    return _flag(value, filter_name, "gpu_reclaim_end_running_jobs")


def _flag(value, filter_name, variable):
    try:
        return boolean(value, strict=True)
    except TypeError:
        raise AnsibleFilterError("%s: %s must be a boolean, got %r" % (filter_name, variable, value)) from None


def ladder_entry_rung(snapshot, platform="linux", end_running_jobs=False):
    from ansible_collections.gpuops.remediation.plugins.module_utils._verdict import entry_rung

    return entry_rung(_snapshot(snapshot, "ladder_entry_rung"), _platform(platform, "ladder_entry_rung").rungs,
                      _end_running_jobs(end_running_jobs, "ladder_entry_rung"))


def needs_destructive_rung(snapshot, destructive_rungs=None, platform="linux", windows_destructive_rungs=None,
                           end_running_jobs=False, max_rung=None, allow_reboot=False, windows_max_rung=None):
    """Whether the walk of this host starts with a destructive rung under the run's options, as the walk decides it:
    destructive_rungs and max_rung as the walk reads them (its argument spec: a list, or a comma-separated string); a
    Windows host reads windows_destructive_rungs and windows_max_rung, as the walk does; unset, the platform's defaults.
    end_running_jobs: gpu_reclaim_end_running_jobs; allow_reboot: gpu_reclaim_allow_reboot."""
    from ansible_collections.gpuops.remediation.plugins.plugin_utils.ladder._ladder_decisions import destructive_entry
    from ansible_collections.gpuops.remediation.plugins.plugin_utils.ladder._ladder_options import WalkOptions

    platform = _platform(platform, "needs_destructive_rung")
    ceiling, rungs = platform.rungs_of(dict(max_rung=max_rung, destructive_rungs=destructive_rungs,
                                            windows=dict(max_rung=windows_max_rung, destructive_rungs=windows_destructive_rungs)))
    try:
        rungs = check_type_list(rungs)
    except TypeError:
        raise AnsibleFilterError("needs_destructive_rung: %s must be a list of rungs, got %r" % (platform.destructive_rungs_variable, rungs)) from None
    unknown = [rung for rung in rungs if rung not in platform.rungs]
    if unknown:
        raise AnsibleFilterError("needs_destructive_rung: %s names no rung %s of the %s ladder (%s)"
                                 % (platform.destructive_rungs_variable, ", ".join(map(repr, unknown)), platform.name, ", ".join(platform.rungs)))
    if ceiling not in platform.rungs:
        raise AnsibleFilterError("needs_destructive_rung: %s must be a rung of the %s ladder (%s), got %r"
                                 % (platform.max_rung_variable, platform.name, ", ".join(platform.rungs), ceiling))
    options = WalkOptions.before_walk(platform=platform.name, max_rung=ceiling, destructive_rungs=rungs,
                                      allow_reboot=_flag(allow_reboot, "needs_destructive_rung", "gpu_reclaim_allow_reboot"),
                                      end_running_jobs=_end_running_jobs(end_running_jobs, "needs_destructive_rung"))
    return destructive_entry(_snapshot(snapshot, "needs_destructive_rung"), options) is not None


def host_platform(given, connection="", shell_type="", os_family=""):
    from ansible_collections.gpuops.remediation.plugins.plugin_utils.ladder._host_platform import host_platform as _host_platform

    try:
        return _host_platform(given or "", connection or "", shell_type or "", os_family or "")
    except ValueError as exc:
        raise AnsibleFilterError("host_platform: %s" % exc) from None


def fleet_guard_refusal(destructive_hosts, host_count, max_percent):
    from ansible_collections.gpuops.remediation.plugins.plugin_utils.ladder._ladder_decisions import fleet_guard

    try:
        count, percent = int(host_count), int(max_percent)
    except (TypeError, ValueError):
        raise AnsibleFilterError("fleet_guard_refusal: the host count and the percentage (gpu_remediate_max_destructive_percent) "
                                 "must be whole numbers, got %r and %r" % (host_count, max_percent)) from None
    if not 0 <= percent <= 100:
        raise AnsibleFilterError("fleet_guard_refusal: gpu_remediate_max_destructive_percent must be 0..100, got %r" % (max_percent,))
    return fleet_guard([str(host) for host in destructive_hosts], count, percent)


def snapshot_summary(snapshot):
    from ansible_collections.gpuops.remediation.plugins.plugin_utils.report._summary import snapshot_lines

    return snapshot_lines(_snapshot(snapshot, "snapshot_summary"))


def taken_snapshot(result, *others):
    """Of the registered results of a platform's snapshot tasks (each skipped but one: a skipped task registers a result
    too), the one that ran."""
    ran = [item for item in (result,) + others if isinstance(item, Mapping) and not item.get("skipped")]
    if len(ran) != 1:
        raise AnsibleFilterError("taken_snapshot: exactly one of the snapshot tasks must have run, %d did" % len(ran))
    return _snapshot(ran[0], "taken_snapshot")


def flagged_hosts(hosts, hostvars, flag):
    """The hosts, in order, whose variable `flag` is set and true (gpu_remediate_destructive, gpu_watch_remediated)."""
    if not isinstance(flag, str) or not flag:
        raise AnsibleFilterError("flagged_hosts: the flag must be a variable name, got %r" % (flag,))
    return [str(host) for host in hosts if boolean((hostvars.get(host) or {}).get(flag) or False, strict=False)]


def kubernetes_cordon_is_ours(node_info, annotation, reason):
    from ansible_collections.gpuops.remediation.plugins.plugin_utils.ladder._ladder_decisions import cordon_is_ours

    resources = node_info.get("resources") if isinstance(node_info, Mapping) else None
    if not isinstance(resources, list):
        raise AnsibleFilterError("kubernetes_cordon_is_ours: the input must be a result of kubernetes.core.k8s_info, got %r"
                                 % type(node_info).__name__)
    return cordon_is_ours(resources, annotation, reason)


def breaker_slurm_to_confirm(show_node_text, marker=None):
    from ansible_collections.gpuops.remediation.plugins.plugin_utils._breaker import DEFAULT_DRAIN_REASON, slurm_drains_to_confirm

    marker = DEFAULT_DRAIN_REASON if marker is None else marker
    if not isinstance(show_node_text, str) or not isinstance(marker, str) or not marker:
        raise AnsibleFilterError("breaker_slurm_to_confirm: the input must be the stdout of scontrol --oneliner show node and the "
                                 "marker (gpu_reclaim_drain_reason) a non-empty string, got %r and %r" % (type(show_node_text).__name__, marker))
    return slurm_drains_to_confirm(show_node_text, marker)


def breaker_on(max_percent, max_count):
    """Whether the circuit breaker is on, from gpu_remediate_breaker_max_percent and gpu_remediate_breaker_max_count."""
    from ansible_collections.gpuops.remediation.plugins.plugin_utils._breaker_limits import breaker_on as _breaker_on

    limits = []
    for variable, value in (("gpu_remediate_breaker_max_percent", max_percent), ("gpu_remediate_breaker_max_count", max_count)):
        try:
            limits.append(int(value))
        except (TypeError, ValueError):
            raise AnsibleFilterError("breaker_on: %s must be a whole number, got %r" % (variable, value)) from None
    return _breaker_on(*limits)


def guard_refuses(fleet_refusal, breaker_result=None):
    """Whether the guard refuses this host before its walk: the fleet guard's refusal or the circuit breaker's."""
    from ansible_collections.gpuops.remediation.plugins.plugin_utils.ladder._ladder_decisions import guard_refuses as _guard_refuses

    if breaker_result is not None and not isinstance(breaker_result, Mapping):
        raise AnsibleFilterError("guard_refuses: the circuit breaker's result must be gpuops.remediation.gpu_breaker's registered result, got %r"
                                 % type(breaker_result).__name__)
    return _guard_refuses(fleet_refusal, breaker_result)


class FilterModule:
    def filters(self):
        return {
            "ladder_entry_rung": ladder_entry_rung,
            "needs_destructive_rung": needs_destructive_rung,
            "fleet_guard_refusal": fleet_guard_refusal,
            "kubernetes_cordon_is_ours": kubernetes_cordon_is_ours,
            "snapshot_summary": snapshot_summary,
            "host_platform": host_platform,
            "flagged_hosts": flagged_hosts,
            "taken_snapshot": taken_snapshot,
            "breaker_slurm_to_confirm": breaker_slurm_to_confirm,
            "breaker_on": breaker_on,
            "guard_refuses": guard_refuses,
        }
