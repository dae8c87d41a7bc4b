# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpu_snapshot: an ansible-rulebook event source of ghost memory and unresponsive GPUs that last."""

from __future__ import annotations

DOCUMENTATION = r"""
---
short_description: Emit ghost memory and unresponsive GPU probes that lasted past a threshold and a duration.
description:
  - Polls a node's view of its GPUs, either locally (the collection's C(gpu_holders_info) module run on this machine,
    O(mode=local)) or from the C(gpu_watch) state file (O(mode=state_file), the format docs/watch.md describes), and
    puts an event on the queue for ghost memory above O(ghost_threshold_mib) and for a GPU or probe that does not
    answer, once the condition has been seen in every poll for O(duration_seconds).
  - "Each event: C(event.gpuops) with C(type) (ghost_memory or unresponsive), C(host), C(gpu) and C(pci_bus_id)
    (None: the whole node), C(gpu_index), C(ghost_mib), C(lasted_seconds), C(rung) (reset for ghost memory, reboot
    for an unresponsive GPU), C(message); and C(meta.hosts), the host."
  - A repeat on the same host and GPU within O(throttle_seconds) is dropped. A state file older than the node's last
    remediation (its journal) is not read, as that remediation answered it.
  - With O(mode=local), a C(gpu_holders_info) run that does not answer within O(probe_timeout) is killed and is the
    condition C(unresponsive) of the whole node (C(gpu) None), never hidden as nothing found; one that fails or prints
    no result is reported once by an event C(type) V(source_problem) (rung none) and an error in the log.
  - Never returns; ends when cancelled.
options:
  mode:
    description: V(local) runs gpu_holders_info here; V(state_file) reads gpu_watch's state file.
    type: str
    choices: [local, state_file]
    default: state_file
  host:
    description: The inventory name of the node (C(meta.hosts)). Defaults to the machine's host name.
    type: str
  state_path:
    description:
      - The watch's state file (O(mode=state_file)).
      - It must be root's or the user's the source runs as, reached without a link, and neither it nor any directory
        above it writable by anyone else (sticky or not; docs/safety.md); else it is not read - whoever can write it could make up ghost memory and start a GPU
        reset - and a C(source_problem) event names the option and the file, once. So is a state file that cannot be
        read or is corrupt (a missing one is not, the watch has not run yet).
    type: str
    default: /var/lib/gpuops/watch_state.json
  journal_path:
    description: The node's journal (O(mode=state_file)), read for the last remediation.
    type: str
    default: /var/lib/gpuops/journal.jsonl
  environment:
    description: The environment of gpu_holders_info (O(mode=local)), for example C(GPUOPS_SIM_ROOT) of a simulated node.
    type: dict
  nodes:
    description:
      - Several nodes, a list of mappings with C(host) and C(state_path) (and C(journal_path)), or C(host) and
        C(environment). Overrides O(host), O(state_path), O(environment).
      - Left out (or null), the one node of O(host) and O(state_path). An empty list (what a filter that matched
        nothing gives) names no node, and the source refuses to start, saying so.
    type: list
    elements: dict
  ghost_threshold_mib:
    description: Ghost memory above this many MiB is a condition.
    type: int
    default: 256
  duration_seconds:
    description: How long a condition must last (seen in every poll) before it makes an event.
    type: float
    default: 120
  poll_interval:
    description: Seconds between polls.
    type: float
    default: 30
  throttle_seconds:
    description: A repeat on the same host and GPU within this many seconds makes no new event.
    type: float
    default: 900
  probe_timeout:
    description: The deadline of one local gpu_holders_info run, seconds; past it the node is unresponsive.
    type: float
    default: 60
  inventory:
    description:
      - The inventory the rulebook runs the playbooks with (the file given to C(ansible-rulebook -i)). Given, every
        host this source names (O(host), or each O(nodes) entry's C(host)) must be one host of it - not a group's name (an event's limit would take the whole
        group), not a name both a host and a group have, not a name it lacks - or the source does not start, naming
        the option and the host.
    type: str
"""

EXAMPLES = r"""
- name: Ghost memory of the node, from the watch
  hosts: all
  sources:
    - gpuops.remediation.gpu_snapshot:
        mode: state_file
        host: node07
        duration_seconds: 300
  rules:
    - name: Ghost memory that lasted
      condition: event.gpuops.type == "ghost_memory"
      action:
        run_playbook:
          name: gpuops.remediation.reset_gpu
"""

import asyncio
import json
import logging
import os
import sys
import tempfile
import time

LOGGER = logging.getLogger(__name__)

SOURCE = "gpu_snapshot"
SPEC = {
    "inventory": {"type": "str"},
    "mode": {"type": "str", "default": "state_file", "choices": ["local", "state_file"]},
    "host": {"type": "str"},
    "state_path": {"type": "str", "default": "/var/lib/gpuops/watch_state.json"},
    "journal_path": {"type": "str", "default": "/var/lib/gpuops/journal.jsonl"},
    "environment": {"type": "dict"},
    "nodes": {"type": "list"},
    "ghost_threshold_mib": {"type": "int", "default": 256, "min": 0},
    "duration_seconds": {"type": "float", "default": 120.0, "min": 0},
    "poll_interval": {"type": "float", "default": 30.0, "min": 0.01},
    "throttle_seconds": {"type": "float", "default": 900.0, "min": 0},
    "probe_timeout": {"type": "float", "default": 60.0, "min": 1},
}
MODULE = "ansible_collections.gpuops.remediation.plugins.modules.gpu_holders_info"
NODE_KEYS = ("host", "state_path", "journal_path", "environment")


def _import_collection():
    """ansible-rulebook runs this file by path: the collection is imported from the tree this file is in."""
    try:
        from ansible_collections.gpuops.remediation.plugins.plugin_utils.eda import _source_shared, _snapshot_source  # noqa: F401
    except ImportError:
        # <root>/ansible_collections/gpuops/remediation/extensions/eda/plugins/event_source/<this file>
        sys.path.insert(0, os.path.abspath(os.path.join(os.path.abspath(__file__), *[os.pardir] * 8)))
        from ansible_collections.gpuops.remediation.plugins.plugin_utils.eda import _source_shared, _snapshot_source  # noqa: F401
    return _source_shared, _snapshot_source


def _collections_root():
    import ansible_collections.gpuops.remediation as collection  # noqa: F401

    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(list(collection.__path__)[0]))))


async def _local_snapshot(node, options):
    """gpu_holders_info run on this machine (a child, under probe_timeout): (its result, None, False), or (None, the
    error, whether it hung past the deadline)."""
    env = dict(os.environ, **dict((str(k), str(v)) for k, v in (node.get("environment") or {}).items()))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [_collections_root(), env.get("PYTHONPATH")]))
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
        json.dump({"ANSIBLE_MODULE_ARGS": {"ghost_threshold_mib": options["ghost_threshold_mib"]}}, handle)
        args_file = handle.name
    try:
        process = await asyncio.create_subprocess_exec(sys.executable, "-m", MODULE, args_file, env=env,
                                                       stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        try:
            out, err = await asyncio.wait_for(process.communicate(), options["probe_timeout"])
        except asyncio.TimeoutError:
            return None, "gpu_holders_info did not answer within %s s (killed)" % options["probe_timeout"], True
        finally:
            if process.returncode is None:  # past the deadline, or the source cancelled while it ran: no child left
                process.kill()
                await process.wait()
    finally:
        os.unlink(args_file)
    try:
        result = json.loads(out.decode("utf-8", "replace"))
    except ValueError:
        return None, "gpu_holders_info printed no result (exit %s): %s" % (process.returncode, err.decode("utf-8", "replace")[-400:]), False
    if not isinstance(result, dict) or result.get("failed"):
        return None, "gpu_holders_info failed: %s" % (result.get("msg") if isinstance(result, dict) else result), False
    return result, None, False


def _state_view(node):
    """(the watch state, or [] when it is older than the last remediation (answered); why it cannot be read, or None).
    A missing state is empty (the watch has not run yet); one that cannot be read or is corrupt is empty and said."""
    from ansible_collections.gpuops.remediation.plugins.module_utils._safe_files import UnsafePath
    from ansible_collections.gpuops.remediation.plugins.module_utils.watch._watch import load_state, read_last_remediation

    try:
        state, problem = load_state(node["state_path"])
    except UnsafePath as exc:  # replaced since state_file_problem looked: still not believed
        return [], str(exc)
    if problem:
        return [], "option state_path: %s" % problem.replace(": replaced by a new one", "")
    last, _error = read_last_remediation(node["journal_path"])
    if last and state.get("updated_epoch") is not None and state["updated_epoch"] <= last["epoch"]:
        return [], None
    return state, None


def _nodes(options, shared):
    if options["nodes"] is None:
        return [dict((key, options[key]) for key in NODE_KEYS if key != "host"), ]
    if not options["nodes"]:
        # An empty selection selects nothing: never the one node of host and state_path.
        raise shared.OptionError("%s: option nodes is an empty list: it names no node to watch (leave nodes out, or null, "
                                 "to watch the node of host and state_path)" % SOURCE)
    nodes = []
    for index, node in enumerate(options["nodes"]):
        if not isinstance(node, dict) or not isinstance(node.get("host"), str) or not node["host"]:
            raise shared.OptionError("%s: option nodes[%d] needs a host name, got %r" % (SOURCE, index, node))
        unknown = sorted(set(node) - set(NODE_KEYS))
        if unknown:
            raise shared.OptionError("%s: option nodes[%d]: unknown key %s (known: %s)" % (SOURCE, index, unknown[0], ", ".join(NODE_KEYS)))
        nodes.append(dict(dict((key, options[key]) for key in NODE_KEYS), **node))
    return nodes


async def main(queue, args):
    """Poll every node, put the conditions that lasted on the queue, until cancelled."""
    shared, source = _import_collection()
    options = shared.check_args(SOURCE, args, SPEC)
    throttle = shared.Throttle(options["throttle_seconds"])
    nodes = _nodes(options, shared)
    groups = shared.inventory_groups(SOURCE, options["inventory"]) if options["inventory"] else None
    for node in nodes:
        node["host"] = shared.checked_host(SOURCE, "nodes" if options["nodes"] else "host",
                                           node.get("host") or options["host"] or shared.default_host(), groups)
        node["lasting"] = source.Lasting(node["host"], options["duration_seconds"], throttle)
        node["retry"] = shared.Retry(options["poll_interval"])
    while True:
        for node in nodes:
            if options["mode"] == "local":
                snapshot, error, hung = await _local_snapshot(node, options)
                if hung:  # the node did not answer at all: unresponsive, as a probe that timed out inside it is
                    conditions = [source.hung_probe_condition(error)]
                else:
                    conditions = source.snapshot_conditions(snapshot, options["ghost_threshold_mib"]) if snapshot else []
                if error and not hung:
                    report, _delay = node["retry"].failed(error)
                    if report:
                        LOGGER.error("%s: %s: %s", SOURCE, node["host"], error)
                        await queue.put(shared.problem_event(SOURCE, node["host"], error))
                elif not error:
                    node["retry"].succeeded()
            else:
                # Anyone else could write it (nothing it says is a condition), or it cannot be read: said, once.
                problem = source.state_file_problem(node["state_path"])
                state, problem = (None, problem) if problem else _state_view(node)
                if problem:
                    report, _delay = node["retry"].failed(problem)
                    if report:
                        LOGGER.error("%s: %s: %s", SOURCE, node["host"], problem)
                        await queue.put(shared.problem_event(SOURCE, node["host"], problem))
                else:
                    node["retry"].succeeded()
                conditions = source.state_conditions(state, options["ghost_threshold_mib"]) if state else []
            for event in node["lasting"].feed(conditions, time.time()):
                await queue.put(event)
        await asyncio.sleep(options["poll_interval"])


if __name__ == "__main__":

    class _PrintQueue:
        async def put(self, event):
            print(event, flush=True)

    asyncio.run(main(_PrintQueue(), json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}))
