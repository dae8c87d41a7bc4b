# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpu_kernel_log: an ansible-rulebook event source of NVIDIA Xid and "fallen off the bus" kernel lines."""

from __future__ import annotations

DOCUMENTATION = r"""
---
short_description: Emit one event per NVIDIA Xid or "fallen off the bus" line of a node's kernel log.
description:
  - Follows the kernel log from its end (C(/dev/kmsg), journald or a file), so that old Xids are not replayed (a file
    that appears or is replaced later is read from its start, and its lines dated before the source started are no
    events), and
    puts one event per NVRM Xid line and "fallen off the bus" line on the queue, parsed by the collection's own
    parser (plugins/module_utils/probes/_kernel_log.py) and ranked by the site's Xid policy over NVIDIA's catalog.
  - "Each event: C(event.gpuops) with C(type) (xid or fallen_off_bus), C(host), C(pci_bus_id) (also C(gpu)), C(xid),
    C(name), C(action) (NVIDIA's catalog action, or the policy's), C(catalog_action), C(policy) (catalog or site),
    C(rung) (none, kill, reset, reboot), C(pid), C(process_name), C(gpu_instance_id) and C(compute_instance_id) (the
    line's C(GPU-I), C(GPU-CI)), C(selection) (that MIG instance as C(<bus id>:<GI>[/<CI>]), else the bus id: what the
    run selects), C(scope) (instance, gpu or node), C(message), C(time), C(line); and C(meta.hosts), the host, which
    limits the rule's playbook or job template to it."
  - A repeat of the same Xid on the same host and GPU (or MIG instance) within O(throttle_seconds) is dropped. An event dated before
    a remediation the same log reported (root's C(gpuops-remediation) syslog line of that host and GPU; in a file,
    one root's action journal confirms, see O(journal_path)) is dropped, as it was answered.
  - What it cannot read is reported, never hidden, and tried again after a delay that grows up to a minute (it never
    spins on a lasting error) - C(/dev/kmsg) that cannot be opened (no permission) or read, a journalctl missing or
    ended (started again after the last entry read, C(--after-cursor)) - by an event
    C(event.gpuops.type == "source_problem") with C(source), C(host) and C(message) (rung none), once per problem, and
    an error in ansible-rulebook's log. A file missing or unreadable for a while is read again once it is there.
  - A file rotated (renamed, then created again) is read to its end through the descriptor still open on it before
    the new file is read from its start, so the lines written just before the rotation are not lost.
  - In a file, an NVRM line is the kernel's only when its tag (the first word of its head ending in a colon) is
    C(kernel), or it has no head (dmesg); a C(gpuops-remediation) line only when that is its tag. The words inside
    another program's message (a user's C(logger) line holding them, a user name tried on sshd) make no event and answer none. A
    file cannot tell who wrote a line (C(logger -t kernel) passes); where others log in, use V(journal) or V(kmsg).
  - From journald, a kernel line is taken only from the kernel's transport (C(_TRANSPORT=kernel)) and a remediation
    line only from root (C(_UID=0)); anyone can log a line that calls itself C(kernel) or C(gpuops-remediation).
  - Never returns; ends when cancelled (ansible-rulebook shutting down).
options:
  source:
    description:
      - Where to read. V(kmsg) reads C(/dev/kmsg) (root), V(journal) follows C(journalctl -f -o json) (kernel lines and
        the C(gpuops-remediation) lines), V(file) a log file (C(/var/log/syslog), C(/var/log/kern.log), or a collector's
        file per host, see O(paths)).
    type: str
    choices: [kmsg, journal, file]
    default: file
  path:
    description: The file of O(source=file).
    type: str
    default: /var/log/syslog
  paths:
    description:
      - Several hosts' files (a log collector's), a mapping of inventory host name to a file or a list of files (its
        kernel log and its syslog, where they are apart). Overrides O(path) and O(host).
      - Left out (or null), O(path) for O(host). An empty mapping (what a filter that matched nothing gives) names no
        host, and the source refuses to start, saying so.
    type: dict
  host:
    description: The inventory name of the node whose log this is (C(meta.hosts)). Defaults to the machine's host name.
    type: str
  poll_interval:
    description: Seconds between reads of a file or of C(/dev/kmsg).
    type: float
    default: 1.0
  throttle_seconds:
    description: A repeat of the same Xid on the same host and GPU within this many seconds makes no new event.
    type: float
    default: 300
  xid_policy:
    description: The site's Xid policy, a mapping of Xid code to rung (none, kill, reset, reboot), over NVIDIA's catalog.
    type: dict
  xid_policy_file:
    description:
      - A YAML file holding the policy, the one kept in the inventory for the playbooks
        (C(group_vars/all/gpuops_xid_policy.yml), key C(gpuops_xid_policy)). O(xid_policy) entries win over it.
    type: str
  journalctl:
    description: The journalctl of O(source=journal).
    type: str
    default: journalctl
  answers_seconds:
    description:
      - At its start, the source reads back the remediations of the last O(answers_seconds) (root's
        C(gpuops-remediation) journal entries with O(source=journal); the lines of the followed files with
        O(source=file)) before it takes events, so that after a restart a late copy of an Xid a reset already answered
        starts no second run. V(0) reads nothing back. O(source=kmsg) has no remediation lines.
    type: float
    default: 3600
  journal_path:
    description:
      - "The collection's action journal on this machine (the modules' O(gpuops.remediation.gpu_reset#module:journal_path)),
        which confirms the answers of O(source=file). A file cannot tell who wrote a line (any user can log
        C(logger -t gpuops-remediation)), so a C(gpuops-remediation) line read from a file answers earlier evidence only when
        this journal, root's file, holds an ok outcome of the same action, run and time, and then for the GPUs that outcome
        reset, whatever the line says. A line it does not confirm answers nothing (the evidence stays unanswered, and the
        source logs why). With O(paths) (a collector's files of other nodes) only the answers of the runs recorded here
        are confirmed. Defaults to C(/var/lib/gpuops/journal.jsonl) (the simulated node's, under E(GPUOPS_SIM_ROOT))."
    type: str
  inventory:
    description:
      - The inventory the rulebook runs the playbooks with (the file given to C(ansible-rulebook -i)). Given, every
        host this source names (O(host), or each key of O(paths)) must be one host of it - not a group's name (an event's limit would take the whole
        group), not a name both a host and a group have, not a name it lacks - or the source does not start, naming
        the option and the host.
    type: str
"""

EXAMPLES = r"""
- name: GPU faults of this node
  hosts: all
  sources:
    - gpuops.remediation.gpu_kernel_log:
        source: journal
        host: node07
        xid_policy_file: /etc/gpuops/gpuops_xid_policy.yml
  rules:
    - name: An Xid that asks for a GPU reset
      condition: event.gpuops.rung == "reset"
      action:
        run_playbook:
          name: gpuops.remediation.reset_gpu
"""

import asyncio
import json
import logging
import os
import sys
import time

LOGGER = logging.getLogger(__name__)
# The longest journal entry (as JSON) read; a longer one is skipped.
JOURNAL_LINE_LIMIT = 1 << 20


def _import_collection():
    """ansible-rulebook runs this file by path: the collection is imported from the tree this file is in."""
    try:
        from ansible_collections.gpuops.remediation.plugins.plugin_utils.eda import _source_shared, _kernel_log_source  # noqa: F401
    except ImportError:
        # <root>/ansible_collections/gpuops/remediation/extensions/eda/plugins/event_source/<this file>
        sys.path.insert(0, os.path.abspath(os.path.join(os.path.abspath(__file__), *[os.pardir] * 8)))
        from ansible_collections.gpuops.remediation.plugins.plugin_utils.eda import _source_shared, _kernel_log_source  # noqa: F401
    return _source_shared, _kernel_log_source


SOURCE = "gpu_kernel_log"
SPEC = {
    "inventory": {"type": "str"},
    "source": {"type": "str", "default": "file", "choices": ["kmsg", "journal", "file"]},
    "path": {"type": "str", "default": "/var/log/syslog"},
    "paths": {"type": "dict"},
    "host": {"type": "str"},
    "poll_interval": {"type": "float", "default": 1.0, "min": 0.01},
    "throttle_seconds": {"type": "float", "default": 300.0, "min": 0},
    "xid_policy": {"type": "dict"},
    "xid_policy_file": {"type": "str"},
    "journalctl": {"type": "str", "default": "journalctl"},
    "answers_seconds": {"type": "float", "default": 3600.0, "min": 0},
    "journal_path": {"type": "str"},
}
# How long the start's read-back of the journal may take (journalctl of an hour's remediation lines).
RECALL_SECONDS = 60.0


def _boot_time():
    try:
        with open("/proc/stat") as handle:
            for line in handle:
                if line.startswith("btime "):
                    return float(line.split()[1])
    except (IOError, OSError):
        pass
    return None


async def _put(queue, events):
    for event in events:
        await queue.put(event)


async def _follow_files(queue, tails, options):
    """tails: [(KernelLines of a host, [FileTail of each of its files])]."""
    while True:
        for lines_of, files in tails:
            lines, since = [], None
            for tail in files:
                lines += tail.read()
                if tail.read_from_start:
                    since = tail.started
            if lines or lines_of.held:
                await _put(queue, lines_of.feed(lines, time.time(), final=not lines, since=since))
        await asyncio.sleep(options["poll_interval"])


# Where the kernel's records are read (a module global: the tests point it at what cannot be read).
KMSG = "/dev/kmsg"
# Records read in one go before the loop gets a turn.
KMSG_BATCH = 1000


async def _problem(queue, shared, host, message):
    LOGGER.error("%s: %s", SOURCE, message)
    await queue.put(shared.problem_event(SOURCE, host, message))


async def _follow_kmsg(queue, lines_of, options, shared, kernel):
    """/dev/kmsg from its end. What cannot be opened or read (no permission, an error that lasts) is reported once and
    tried again after a delay that grows; opened again, the records read before (by sequence number) are skipped."""
    retry = shared.Retry(options["poll_interval"])
    fd, last_seq = None, None
    try:
        while True:
            if fd is None:
                try:
                    fd = os.open(KMSG, os.O_RDONLY | os.O_NONBLOCK)
                    os.lseek(fd, 0, os.SEEK_END if last_seq is None else os.SEEK_SET)
                except OSError as exc:
                    if fd is not None:
                        os.close(fd)
                        fd = None
                    message = kernel.kmsg_problem(KMSG, exc, opening=True)
                    report, delay = retry.failed(message)
                    if report:
                        await _problem(queue, shared, lines_of.host, message)
                    await asyncio.sleep(delay)
                    continue
            lines, failure = [], None
            for _record in range(KMSG_BATCH):
                try:
                    record = os.read(fd, 8192)
                except BlockingIOError:
                    break
                except BrokenPipeError:  # EPIPE: records overwritten before they were read; the next read goes on
                    continue
                except OSError as exc:
                    failure = exc
                    break
                if not record:
                    break
                text = record.decode("utf-8", "replace")
                seq = kernel.kmsg_seq(text)
                if seq is not None and last_seq is not None and seq <= last_seq:
                    continue  # read before the device was opened again
                last_seq = seq if seq is not None else last_seq
                line = kernel.kmsg_line(text)
                if line:
                    lines.append(line)
            if lines or lines_of.held:
                await _put(queue, lines_of.feed(lines, time.time(), final=not lines))
            if failure is not None:
                os.close(fd)
                fd = None
                message = kernel.kmsg_problem(KMSG, failure, opening=False)
                report, delay = retry.failed(message)
                if report:
                    await _problem(queue, shared, lines_of.host, message)
                await asyncio.sleep(delay)
                continue
            retry.succeeded()
            await asyncio.sleep(options["poll_interval"])
    finally:
        if fd is not None:
            os.close(fd)


async def _follow_journal(queue, lines_of, options, shared, kernel):
    """journalctl --follow as JSON, only the entries journal_lines trusts. When journalctl ends (or cannot be started:
    missing), it is reported and started again after a delay that grows, after the last entry read (its cursor)."""
    retry = shared.Retry(options["poll_interval"])
    cursor, since = None, None
    while True:
        argv = kernel.journal_argv(options["journalctl"], cursor, since)
        since = time.time() if since is None else since
        try:
            process = await asyncio.create_subprocess_exec(*argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                                                           limit=JOURNAL_LINE_LIMIT)
        except OSError as exc:
            message = "cannot run %s: %s; trying again" % (argv[0], exc.strerror or exc)
        else:
            try:
                while True:
                    try:
                        raw = await process.stdout.readline()
                    except ValueError:  # an entry longer than the limit: not one of ours
                        continue
                    if not raw:
                        break
                    try:
                        entry = json.loads(raw.decode("utf-8", "replace"))
                    except ValueError:
                        continue
                    if isinstance(entry, dict) and isinstance(entry.get("__CURSOR"), str):
                        cursor = entry["__CURSOR"]
                    lines = kernel.journal_lines(entry)
                    if lines:
                        await _put(queue, lines_of.feed(lines, time.time()))
                    retry.succeeded()
                err = (await process.stderr.read()).decode("utf-8", "replace").strip().splitlines()
                message = "%s ended (exit %s%s); started again after the last entry read" % (
                    argv[0], await process.wait(), ": " + err[-1] if err else "")
            finally:
                if process.returncode is None:
                    process.kill()
                    await process.wait()
        report, delay = retry.failed(message)
        if report:
            await _problem(queue, shared, lines_of.host, message)
        await asyncio.sleep(delay)


def _recall_files(kernel, tails, window):
    """The remediation lines of each followed file within `window` seconds, read once before the follow starts."""
    now = time.time()
    for lines_of, files in tails if window else []:
        count = sum(lines_of.recall(kernel.recall_file_lines(tail.path), now, window) for tail in files)
        LOGGER.info("%s: %s: %d remediations of the last %d s read back", SOURCE, lines_of.host, count, window)


async def _recall_journal(queue, lines_of, options, shared, kernel):
    """The remediation lines root wrote within answers_seconds, read once before the follow starts; a journalctl that
    does not end in RECALL_SECONDS is reported (one missing, by the follow), and the source goes on without them."""
    now = time.time()
    argv = kernel.recall_argv(options["journalctl"], now - options["answers_seconds"])
    try:
        process = await asyncio.create_subprocess_exec(*argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    except OSError as exc:  # the follow that comes next reports it (once), and keeps trying
        LOGGER.warning("%s: cannot read back the remediations: cannot run %s: %s", SOURCE, argv[0], exc.strerror or exc)
        return
    try:
        out, _err = await asyncio.wait_for(process.communicate(), RECALL_SECONDS)
    except asyncio.TimeoutError:
        process.kill()
        await process.wait()
        await _problem(queue, shared, lines_of.host, "cannot read back the remediations: %s did not end within %d s" % (argv[0], RECALL_SECONDS))
        return
    lines = []
    for raw in out.decode("utf-8", "replace").splitlines():
        try:
            lines += kernel.journal_lines(json.loads(raw))
        except ValueError:
            continue
    count = lines_of.recall(lines, now, options["answers_seconds"])
    LOGGER.info("%s: %s: %d remediations of the last %d s read back", SOURCE, lines_of.host, count, options["answers_seconds"])


async def main(queue, args):
    """Put the events of the log on the queue until cancelled."""
    shared, kernel = _import_collection()
    options = shared.check_args(SOURCE, args, SPEC)
    policy = kernel.load_policy(SOURCE, options["xid_policy"], options["xid_policy_file"])
    throttle = shared.Throttle(options["throttle_seconds"])
    boot = _boot_time()
    groups = shared.inventory_groups(SOURCE, options["inventory"]) if options["inventory"] else None
    if options["paths"] == {}:
        # An empty selection selects nothing: never the one file of path and host.
        raise shared.OptionError("%s: option paths is an empty mapping: it names no host's file to follow (leave paths out, or "
                                 "null, to follow path for host)" % SOURCE)
    if options["paths"]:
        if options["source"] != "file":
            raise shared.OptionError("%s: option paths needs source=file, got source=%r" % (SOURCE, options["source"]))
        tails, answers = [], kernel.root_answers(options["journal_path"])
        for host, paths in sorted(options["paths"].items(), key=lambda item: str(item[0])):
            files = [paths] if isinstance(paths, str) else paths
            if not isinstance(files, list) or not files or not all(isinstance(path, str) and path for path in files):
                raise shared.OptionError("%s: option paths: host %s needs a file name or a list of them, got %r" % (SOURCE, host, paths))
            host = shared.checked_host(SOURCE, "paths", host, groups)
            tails.append((kernel.KernelLines(host, policy, throttle, boot, answers), [kernel.FileTail(path) for path in files]))
        _recall_files(kernel, tails, options["answers_seconds"])
        await _follow_files(queue, tails, options)
    lines_of = kernel.KernelLines(shared.checked_host(SOURCE, "host", options["host"] or shared.default_host(), groups), policy, throttle, boot)
    if options["source"] == "file":
        lines_of.root_answers = kernel.root_answers(options["journal_path"])
        tails = [(lines_of, [kernel.FileTail(options["path"])])]
        _recall_files(kernel, tails, options["answers_seconds"])
        await _follow_files(queue, tails, options)
    elif options["source"] == "kmsg":  # no remediation lines in the kernel's ring buffer: nothing to read back
        await _follow_kmsg(queue, lines_of, options, shared, kernel)
    else:
        if options["answers_seconds"]:
            await _recall_journal(queue, lines_of, options, shared, kernel)
        await _follow_journal(queue, lines_of, options, shared, kernel)


if __name__ == "__main__":

    class _PrintQueue:
        async def put(self, event):
            print(event, flush=True)

    asyncio.run(main(_PrintQueue(), {"path": sys.argv[1]} if len(sys.argv) > 1 else {}))
