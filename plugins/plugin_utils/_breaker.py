# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet-wide circuit breaker: before a destructive rung, count the nodes the fleet already has out, from state that
outlives a job, and refuse over the configured share or count.

Each event-driven run targets one host, so the per-run fleet guard (_ladder_decisions.fleet_guard) counts one host of one; the
breaker counts across runs: the breaker records of the controller's state directory (one per host that passed it for a
destructive rung, within the window), the Slurm nodes drained with our reason (_slurm.drain_run), the Kubernetes
nodes carrying our cordon annotation (_ladder_decisions.cordon_is_ours) and, opt-in, the destructive actions of the
fleet hosts' own journals (journal_out). breaker_refusal is the one decision; the rest read state.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat

from ansible_collections.gpuops.remediation.plugins.module_utils._safe_files import UnsafePath, open_dir, read_trusted, writable_by_others
from ansible_collections.gpuops.remediation.plugins.module_utils.journal._files import journal_epoch
from ansible_collections.gpuops.remediation.plugins.module_utils.journal._evidence import CLOCK_SLACK_SECONDS, DESTRUCTIVE_ACTIONS
from ansible_collections.gpuops.remediation.plugins.module_utils.scheduler._slurm import drained_with_marker, parse_nodes
from ansible_collections.gpuops.remediation.plugins.module_utils._verdict import memory_held
from ansible_collections.gpuops.remediation.plugins.plugin_utils.ladder._ladder_decisions import cordon_is_ours, destructive_entry
from ansible_collections.gpuops.remediation.plugins.plugin_utils.ladder._ladder_options import WalkOptions
from ansible_collections.gpuops.remediation.plugins.plugin_utils._breaker_limits import breaker_limit
from ansible_collections.gpuops.remediation.plugins.plugin_utils._words import plural

RECORD_SUFFIX = ".breaker.json"
# The start of our drains' reasons and our cordon annotation's value (gpu_reclaim_drain_reason's default).
DEFAULT_DRAIN_REASON = "gpuops: reclaiming stuck GPU memory"


def counted_rung(snapshot, platform, destructive_rungs, max_rung, allow_reboot, end_running_jobs=False):
    """The destructive rung this host's walk would start with, which the breaker counts, as the walk and the fleet guard
    decide it (_ladder_decisions.destructive_entry under the run's options): a rung of destructive_rungs, or any rung
    that would end running programs (end_running_jobs). None when the walk would take no destructive rung, or would
    refuse before any (the evidence needs a rung above the ceiling, or busy programs share a GPU that needs a reset)."""
    options = WalkOptions.before_walk(platform=platform, max_rung=max_rung, allow_reboot=allow_reboot,
                                      destructive_rungs=destructive_rungs, end_running_jobs=end_running_jobs)
    return destructive_entry(snapshot, options)


def default_node_name(host):
    """The host's node name in Slurm or Kubernetes when none is given: gpu_reclaim_drain_node_name's default,
    inventory_hostname_short (the name up to its first dot)."""
    return host.split(".")[0]


def breaker_refusal(host, out, fleet_size, max_percent, max_count, window_minutes, node_name=None, unread=None):
    """The refusal of a destructive rung on `host` when the nodes already out (`out`: {node: why}, this host left out
    of the count, by its inventory name and by its node name) and this one would be more than the limit, or "".
    unread ({host: why}): the fleet hosts whose journals could not be read, counted neither out nor healthy: the refusal
    names them (unread_note), as the allowing run's warning does."""
    limit = breaker_limit(fleet_size, max_percent, max_count)
    itself = (host, node_name or host)
    others = dict((node, why) for node, why in out.items() if node not in itself)
    if limit is None or len(others) + 1 <= limit:
        return ""
    named = "; ".join("%s (%s)" % (node, others[node]) for node in sorted(others))
    note = unread_note(dict((node, why) for node, why in (unread or {}).items() if node not in itself))
    return ("circuit breaker: %d of the %s of the fleet %s already out: %s. A destructive rung on %s would make %d, "
            "more than the %s allowed (gpu_remediate_breaker_max_percent=%s, gpu_remediate_breaker_max_count=%s). Nothing was "
            "done on %s. It closes again when nodes come back or their records pass the %s-minute window "
            "(gpu_remediate_breaker_window_minutes); or raise the limit.%s"
            % (len(others), plural(fleet_size, "node"), "is" if len(others) == 1 else "are", named, host, len(others) + 1, limit,
               max_percent, max_count, host, window_minutes, " " + note if note else ""))


def unread_note(unread):
    """The sentence that names the fleet hosts whose journals could not be read ({host: why}), or ""."""
    if not unread:
        return ""
    one = len(unread) == 1
    return ("circuit breaker: the %s of %s could not be read, so %s counted neither out nor healthy: %s." % (
        "journal" if one else "journals", plural(len(unread), "fleet host"), "it is" if one else "they are",
        "; ".join("%s (%s)" % (host, unread[host]) for host in sorted(unread))))


def journal_destructive(records, now, window_minutes):
    """The destructive action of one node's journal records that started (its intent) last within the window, and did
    not fail: ok, or its outcome unknown (no outcome line: still going, or its run was cut; or the outcome a later run
    wrote for an interrupted one). {"action", "name", "ts", "epoch", "run_id", "outcome"} or None. A line dated more
    than CLOCK_SLACK_SECONDS ahead of now was written under a wrong clock and counts for nothing."""
    outcomes = dict((record.get("id"), record) for record in records
                    if isinstance(record, dict) and record.get("phase") == "outcome")
    found = None
    for record in records:
        if not isinstance(record, dict) or record.get("phase") != "intent" or record.get("action") not in DESTRUCTIVE_ACTIONS:
            continue
        if record["action"] == "systemctl_isolate" and record.get("target") != "multi-user.target":
            continue  # the way back up (graphical.target), or a repair of an interrupted restart
        epoch = journal_epoch(record.get("ts"))
        if epoch is None or now - epoch > window_minutes * 60 or epoch - now > CLOCK_SLACK_SECONDS:
            continue
        outcome = outcomes.get(record.get("id"))
        if outcome is None:
            word = "outcome unknown: no outcome line"
        elif outcome.get("interrupted"):
            word = "outcome unknown: its run was interrupted"
        elif outcome.get("ok") is True:
            word = "ok"
        else:
            continue
        if found is None or epoch >= found["epoch"]:
            found = {"action": record["action"], "name": DESTRUCTIVE_ACTIONS[record["action"]], "ts": record.get("ts"),
                     "epoch": epoch, "run_id": record.get("run_id"), "outcome": word}
    return found


def journal_out(journals, now, window_minutes, node_names=None):
    """{node: why} of the fleet hosts whose journal ({host: records}) shows a destructive action started within the
    window (journal_destructive), each under the host's node name as the other sources name it: node_names' ({host:
    node}: its gpu_reclaim_drain_node_name, or the name its breaker record holds), else default_node_name."""
    out = {}
    for host, records in journals.items():
        found = journal_destructive(records or [], now, window_minutes)
        if found:
            out[(node_names or {}).get(host) or default_node_name(host)] = "%s (%s) in its journal at %s, %d min ago, run %s, %s" % (
                found["name"], found["action"], found["ts"], max(0, now - found["epoch"]) // 60, found["run_id"] or "?",
                found["outcome"])
    return out


def journal_reads(results):
    """({host: records}, {host: why not read}) from the results of gpu_journal_info run on each fleet host, as a loop
    with delegate_to registers them (item: the host). Unreachable, failed, or with an error reading the journal, a host
    is unread: counted neither out nor healthy, and named (unread_note)."""
    journals, unread = {}, {}
    for result in results or []:
        host = result.get("item") if isinstance(result, dict) else None
        if not isinstance(host, str) or not host:
            continue
        if result.get("unreachable"):
            unread[host] = "unreachable: %s" % (result.get("msg") or "no reason given")
        elif result.get("skipped"):
            unread[host] = "not read (skipped)"
        elif result.get("error"):
            unread[host] = str(result["error"])
        elif result.get("failed") or not isinstance(result.get("records"), list):
            unread[host] = "the read failed: %s" % (result.get("msg") or "no journal lines came back")
        else:
            journals[host] = result["records"]
    return journals, unread


def slurm_drains_to_confirm(show_node_text, marker):
    """The nodes `scontrol --oneliner show node` shows drained with exactly our reason: each is read again as Slurm stores
    it (`sinfo --nodes NODE --format %E`, whole) before it counts (slurm_out), since scontrol drops a reason's empty
    lines and cannot tell its own [user@time] stamp from one the reason holds."""
    return sorted(drained_with_marker(parse_nodes(show_node_text or ""), marker))


def slurm_out(show_node_text, marker, stored_reasons=None):
    """{node: why} of the nodes drained with our reason, from `scontrol --oneliner show node` over the whole cluster
    (one record per line, each reason whole: sinfo prints a reason's later lines as lines of their own, so that our
    first line followed by an administrator's would read as ours); a drain with anyone else's reason is not ours.
    stored_reasons ({node: the stdout of `sinfo --all --noheader --Node --nodes NODE --format %E`}, for the nodes of
    slurm_drains_to_confirm): a reason sinfo shows otherwise (an admin's, with an empty line or a stamp of its own) is
    not ours either."""
    nodes = parse_nodes(show_node_text or "")
    for node in nodes:
        if stored_reasons is not None and node["node"] in stored_reasons:
            node["sinfo_reason"] = stored_reasons[node["node"]]
    return dict((name, "drained in Slurm by gpuops run %s" % run) for name, run in drained_with_marker(nodes, marker).items())


def kubernetes_out(node_resources, annotation, reason):
    """{node: why} of the Kubernetes nodes (kubernetes.core.k8s_info's resources) cordoned by us."""
    out = {}
    for node in node_resources or []:
        name = (node.get("metadata") or {}).get("name")
        if name and (node.get("spec") or {}).get("unschedulable") and cordon_is_ours([node], annotation, reason):
            out[name] = "cordoned in Kubernetes by gpuops"
    return out


def recorded_out(records, now, window_minutes):
    """{node: why} of the breaker records (one per host that passed the breaker for a destructive rung) of the window,
    each under the host's node name (its Slurm or Kubernetes name, where the record has one), so that a host both
    recorded and drained by us is one node out, not two."""
    out = {}
    for record in records:
        epoch = record.get("epoch")
        # A record dated a little after now (another controller's clock, on a shared state directory) counts: it is
        # recent. One dated further ahead than CLOCK_SLACK_SECONDS was written under a wrong clock and counts for
        # nothing, as a journal line does (journal_destructive): it would otherwise hold a place for as long as it is ahead.
        if isinstance(epoch, (int, float)) and not isinstance(epoch, bool) and now - epoch <= window_minutes * 60 \
                and epoch - now <= CLOCK_SLACK_SECONDS and record.get("host"):
            node = record.get("node") if isinstance(record.get("node"), str) and record.get("node") else record["host"]
            out[node] = "%s rung by run %s, %d min ago" % (record.get("rung") or "destructive", record.get("run") or "?",
                                                           max(0, now - epoch) // 60)
    return out


def recorded_node_names(records):
    """{host: node} of the breaker records that name the host's node (its Slurm or Kubernetes name)."""
    return dict((record["host"], record["node"]) for record in records
                if isinstance(record.get("host"), str) and isinstance(record.get("node"), str) and record["node"])


def read_records(directory):
    """The breaker records of the state directory. Each is believed only as the run's (or root's) own regular file in a
    directory nobody else can write (_safe_files.read_trusted): any other raises UnsafePath naming it and its owner,
    never skipped. A record that is not JSON is skipped (each is written whole: _safe_files.write_atomic)."""
    records = []
    for name in sorted(os.listdir(directory)) if os.path.isdir(directory) else []:
        if not name.endswith(RECORD_SUFFIX):
            continue
        read = read_trusted(os.path.join(directory, name), STATE_DIR_OPTION)
        try:
            record = json.loads(read[0].decode("utf-8")) if read else None
        except (UnicodeDecodeError, ValueError):
            continue
        if isinstance(record, dict):
            records.append(record)
    return records


def record_name(host):
    """The record's file name: the host name made safe for a file name, and told apart from its neighbours (a name
    that had to change gets a digest of the whole name: "a/b" and "a_b" are two hosts, two records)."""
    safe = "".join(char if char.isalnum() or char in "-_." else "_" for char in host).lstrip(".")
    if safe != host:
        safe = "%s-%s" % (safe or "_", hashlib.sha256(host.encode("utf-8", "surrogateescape")).hexdigest()[:16])
    return safe + RECORD_SUFFIX


def host_is_back(snapshot):
    """Whether the host's own inspection (gpu_holders_info's snapshot) finds it healthy - no GPU memory held, no reboot
    asked for: its breaker record is removed, so that it no longer counts as out. Only the host's own later run sees
    that; right after its walk it still counts for the window, so that a storm of resets (each one fixed at once) is
    still a storm, and a bad driver push cannot reset the fleet one node after another."""
    return not memory_held(snapshot)


STATE_DIR_OPTION = "state_dir (gpu_remediate_breaker_dir)"


def state_dir_problem(path, uid):
    """Why the breaker's records cannot be kept in `path` (an existing directory) by the user `uid`, or None: another
    user's directory, one anyone else may write into (sticky or not: others could add records there, closing the
    breaker), or one reached through a link lets someone else forge records (refusing every host) or remove them
    (opening the breaker); one this user cannot write is no place for them either."""
    try:
        info = os.stat(path)
    except OSError as exc:
        return "%s %r cannot be read: %s" % (STATE_DIR_OPTION, path, exc.strerror or exc)
    if not stat.S_ISDIR(info.st_mode):
        return "%s %r is not a directory" % (STATE_DIR_OPTION, path)
    if info.st_uid != uid:
        return ("%s %r belongs to uid %d, not to this user (uid %d): another user could forge or remove the breaker's "
                "records; give a directory of this user's own (mode 0700)" % (STATE_DIR_OPTION, path, info.st_uid, uid))
    if writable_by_others(info):
        return ("%s %r is writable by others (mode %04o): they could forge or remove the breaker's records; chmod 0700 "
                "it, or give another" % (STATE_DIR_OPTION, path, stat.S_IMODE(info.st_mode)))
    if not os.access(path, os.W_OK | os.X_OK):
        return "%s %r is not writable by this user" % (STATE_DIR_OPTION, path)
    try:
        os.close(open_dir(path, STATE_DIR_OPTION, holds_trusted=True))
    except UnsafePath as exc:
        return str(exc)
    return None


def prepare_state_dir(path, uid, create):
    """The breaker's directory checked (state_dir_problem) and, with `create`, made (mode 0700) when missing: None, or
    why not. Not absolute (an unresolved "~", HOME unset) is refused: a relative path would be wherever the run starts."""
    if not path or not os.path.isabs(path):
        return "%s must be an absolute path on the controller, got %r" % (STATE_DIR_OPTION, path)
    if not os.path.lexists(path):
        if not create:
            return None  # check mode: nothing there yet, nothing made
        try:
            os.close(open_dir(path, STATE_DIR_OPTION, create=True, mode=0o700, holds_trusted=True))
        except UnsafePath as exc:
            return str(exc)
        except OSError as exc:
            return "%s %r cannot be made: %s" % (STATE_DIR_OPTION, path, exc.strerror or exc)
    return state_dir_problem(path, uid)


def remove_record(directory, host):
    """Remove the host's breaker record; whether there was one."""
    try:
        os.unlink(os.path.join(directory, record_name(host)))
    except FileNotFoundError:
        return False
    return True
