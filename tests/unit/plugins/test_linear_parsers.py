# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every parser of node text runs in time linear in its input.

Every regular expression in plugins/ and extensions/ (every `re.compile`, `re.search`, ... call, found by an AST scan) is
listed in SITES with the worst inputs known for it, beyond the generic ones each gets (long runs of each of its literal
characters, after its literal lead and repeated with it): a new pattern without an entry fails
test_every_pattern_is_listed. Each pattern is searched through its whole input (finditer: every start, the most work
any use of it can do) at n and 8n characters, in a child process: the time must grow about 8 times (the bound is
generous: 24; a quadratic pattern grows 64 times, an exponential one never answers and fails on the child's deadline).
No figure depends on the machine's speed, only the growth. The parsers themselves are fed 1 MiB inputs the same way.
"""

from __future__ import annotations

import ast
import importlib
import multiprocessing
import os
import re
import time

import pytest

try:
    from re import _parser as sre_parse  # Python 3.11+
except ImportError:
    import sre_parse

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
CALLS = ("compile", "match", "search", "fullmatch", "sub", "subn", "split", "findall", "finditer")
FLAGS_AT = {"compile": 1, "match": 2, "search": 2, "fullmatch": 2, "findall": 2, "finditer": 2, "split": 3, "sub": 4, "subn": 4}
GROWTH_BOUND = 24.0  # time at 8n over time at n: linear is 8, quadratic 64
DEADLINE = 120  # seconds a child has for one pattern's inputs at both sizes
SMALL = 4096

# {file: {the pattern's source (whitespace collapsed): [(prefix, unit), ...]}}: each (prefix, unit) is fed as
# prefix + unit * k and as (prefix + unit) * k, with a character no pattern expects at the end.
SITES = {
    'plugins/module_utils/_safe_files.py': {
        'r"^\\.%s\\.[A-Za-z0-9_]{8}$" % re.escape(os.path.basename(path))': [],
    },
    'plugins/module_utils/kill/_container_runtime.py': {
        'r"^user@\\d+\\.service$"': [],
    },
    'plugins/module_utils/kill/_freezer.py': {
        'r"\\\\([0-7]{3})"': [],
    },
    'plugins/module_utils/journal/_writer.py': {
        'r"\\s+"': [],
    },
    'plugins/module_utils/probes/_kernel_log.py': {
        'r"\\bto\\s+0x[0-9A-Fa-f]+\\s*\\(([^()]*)\\)"': [("", "to 0x1 ("), ("to 0x1 (", "a"), ("", "to 0x1 (a)")],
        'r"\\[([A-Z][a-z]{2} [A-Z][a-z]{2} +\\d{1,2} \\d\\d:\\d\\d:\\d\\d \\d{4})\\]"': [],
        'r"(\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d(?:[.,]\\d+)?(?:Z|[+-]\\d\\d:?\\d\\d)?)"': [],
        'r"([A-Z][a-z]{2} +\\d{1,2} \\d\\d:\\d\\d:\\d\\d)"': [],
        'r"\\[\\s*(\\d+\\.\\d+)\\]"': [],
        'r"^(\\d{4})-(\\d\\d)-(\\d\\d)T(\\d\\d):(\\d\\d):(\\d\\d)(?:[.,](\\d+))?(Z|[+-]\\d\\d:?\\d\\d)?$"': [],
        ('r"^Xid \\((?:PCI:)?(?P<bus>[0-9A-Fa-f:.]+)(?:\\s+GPU-I:(?P<gi>[0-9]{1,2}))?(?:\\s+GPU-CI:(?P<ci>[0-9]{1,2}))?\\s*\\):" '
         'r"\\s*(?P<xid>[0-9]{1,9})(?:,\\s*(?P<rest>.*))?$"'): [("Xid (PCI:0000:01:00", " "), ("Xid (PCI:", "0:"), ("Xid (0): 1,", " ")],
        'r"^pid=\'?(?P<pid><unknown>|[0-9]{1,7})\'?(?:,\\s*|$)(?P<rest>.*)$"': [],
        'r"^name=\'?(?P<name>.*?)\'?(?:,\\s*(?P<message>.*))?$"': [],
        'r"\\b(D-)?RST:\\s*Yes\\b"': [],
        'r"(?:PCI:)?((?:[0-9A-Fa-f]{4,8}:)?[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}(?:\\.[0-7])?)"': [],
        'r"^The NVIDIA GPU (?P<bus>\\S+)"': [],
    },
    'plugins/module_utils/probes/_kmod.py': {
        'r"^Module\\s+Size\\s+Used by"': [],
        'r"Module (?P<module>\\S+) is in use by:?(?P<users>.*)$"': [("Module x is in use by: a", " "), ("", "Module x is in use by: a ")],
        'r"Module (?P<module>\\S+?) is in use\\.?\\s*$"': [],
        'r"Module (?P<module>\\S+) is not currently loaded"': [],
        'r"Module (?P<module>\\S+) does not exist in /proc/modules"': [],
        'r"Module (?P<module>\\S+) not found"': [],
        'r"could not (?:remove|insert) (?:module )?\'?(?P<module>[^\':\\s]+)\'?: Resource temporarily unavailable"': [],
        'r"could not (?:remove|insert) (?:module )?\'?(?P<module>[^\':\\s]+)\'?: Device or resource busy"': [],
        'r"could not (?:remove|insert) (?:module )?\'?(?P<module>[^\':\\s]+)\'?: Operation not permitted"': [],
        'r"could not (?:remove|insert) (?:module )?\'?(?P<module>[^\':\\s]+)\'?: No such file or directory"': [],
        'r"Operation not permitted|Permission denied|must be superuser|must be root"': [],
        'r"(?:FATAL|ERROR):"': [],
        'r"\'(?P<quoted>[A-Za-z0-9_-]+)\'|\\b(?:for|module) (?P<named>[A-Za-z0-9_-]+)"': [],
    },
    'plugins/module_utils/probes/_nvsmi.py': {
        'r"^(-?\\d+)(?:\\s*(?:[A-Za-z%/]+))?$"': [],
        'r"^(-?\\d+\\.\\d+)\\s*(?:[A-Za-z%/]+)$"': [],
        'r"^(\\d+)\\s*(KiB|MiB|GiB)?$"': [],
        'r"[\\s_]"': [],
        'r"[\\s_-]"': [],
    },
    'plugins/module_utils/_mig_selection.py': {
        'r"^(?P<gpu>[^/]{1,64}):(?P<gi>[0-9]{1,2})(?:/(?P<ci>[0-9]{1,2}))?$"': [("", "0:"), ("", ":1"), ("0", ":1/")],
    },
    'plugins/module_utils/probes/_pci.py': {
        'r"^(?:PCI:)?(?:(?P<domain>[0-9A-Fa-f]{1,8}):)?(?P<bus>[0-9A-Fa-f]{1,2}):(?P<device>[0-9A-Fa-f]{1,2})" r"(?:\\.(?P<function>[0-7]))?$"': [],
    },
    'plugins/module_utils/probes/_device_nodes.py': {
        'r"^nvidia(?:\\d+|ctl|-uvm|-uvm-tools|-modeset|-nvswitch\\d+|-nvswitchctl)$"': [],
    },
    'plugins/module_utils/probes/_cgroup.py': {
        'r"^docker-%s\\.scope$" % _HEX_ID': [],
        'r"^cri-containerd-%s\\.scope$" % _HEX_ID': [],
        'r"^nerdctl-%s\\.scope$" % _HEX_ID': [],
        'r"^.*:cri-containerd:%s$" % _HEX_ID': [],
        'r"^crio-(?:conmon-)?%s(?:\\.scope)?$" % _HEX_ID': [],
        'r"^libpod-(?:conmon-|payload-)?%s(?:\\.scope)?$" % _HEX_ID': [],
        'r"^%s$" % _HEX_ID': [],
        'r"(?:^|-)pod([0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12}|[0-9a-f]{32})" r"(?:\\.slice)?(?:$|:)"': [],
        'r"^job_(\\d+)$"': [],
        'r"^(?:uid_\\d+|(?:.+_)?slurmstepd\\.scope)$"': [],
    },
    'plugins/module_utils/probes/_reset_output.py': {
        'r"\\b((?:[0-9A-Fa-f]{4,8}:)?[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\\.[0-7])\\b"': [],
        'r"successfully reset"': [],
        'r"^\\d+ devices? (?:is|are) currently being used"': [],
    },
    'plugins/module_utils/scheduler/_slurm.py': {
        'r" \\[([^\\s\\[\\]@]+)@(\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d|Unknown|None)\\]"': [],
        'r"[\\x00-\\x1f\\x7f]"': [],
        'r"^Node \\S+ not found"': [],
        'r"\\ANodeName=(\\S+) "': [],
        'r" State=(\\S+)"': [],
        'r"[^A-Za-z0-9._@+-]"': [],
        'r"[()\\[\\]]"': [],
        'r"\\s+"': [],
        'r"%s \\(run ([A-Za-z0-9._@+-]+): [^()\\[\\]\\x00-\\x1f\\x7f]*\\)" % re.escape(marker)': [],
    },
    'plugins/module_utils/_snapshot.py': {
        'r"/nvidia(\\d+)$"': [],
    },
    'plugins/modules/gpu_journal_info.py': {
        'r"^(\\d+(?:\\.\\d+)?)\\s*([smhdw])$"': [],
    },
    'plugins/module_utils/_mig_layout.py': {
        'r"^Successfully created GPU instance ID +(\\d+) on GPU +(\\d+) "': [],
    },
    'plugins/plugin_utils/eda/_root_answers.py': {
        'r"\\s+"': [],
    },
    'plugins/plugin_utils/eda/_source_shared.py': {
        'r"\\A[A-Za-z0-9_][A-Za-z0-9._-]*\\Z"': [],
    },
    'plugins/plugin_utils/_inputs.py': {
        'r"-?[0-9]+"': [],
        'r"([0-9]+)(%?)"': [],
    },
    'plugins/plugin_utils/ladder/_ladder_decisions.py': {
        'r"[\\x00-\\x20\\x7f]+"': [],
    },
    'plugins/plugin_utils/windows/tools/_gpu_memory_counters.py': {
        'r"^pid_(\\d+)_luid_(0x[0-9a-f]+)_(0x[0-9a-f]+)_phys_(\\d+)$"': [],
        'r"^luid_(0x[0-9a-f]+)_(0x[0-9a-f]+)_phys_(\\d+)$"': [],
        'r"\\\\([^\\\\]*)\\(([^\\\\()]*)\\)\\\\([^\\\\]+)$"': [],
    },
    'plugins/plugin_utils/windows/node/_node_journal.py': {
        'r"^[A-Za-z]:(\\\\[^\\\\/:*?\\"<>|\\x00-\\x1f]+)+$"': [],
    },
    'plugins/plugin_utils/windows/node/_convertto_json.py': {
        'r"^/Date\\((-?\\d+)(?:[+-]\\d{4})?\\)/$"': [],
        'r"^(\\d{4})-(\\d{2})-(\\d{2})T(\\d{2}):(\\d{2}):(\\d{2})(?:\\.(\\d+))?(Z|[+-]\\d{2}:\\d{2})?$"': [],
        'r"^(\\d{4})(\\d{2})(\\d{2})(\\d{2})(\\d{2})(\\d{2})\\.(\\d{6})([+-]\\d{3})$"': [],
        'r"^\\s*-?\\d+(\\.\\d+)?\\s*$"': [],
    },
    'plugins/plugin_utils/windows/tools/_pnputil_adapters.py': {
        'r"^(?P<label>[^:]+):\\s+(?P<value>.*)$"': [],
        'r"^\\{[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\\}$"': [],
        'r"^[\\w.-]+\\.inf$"': [],
        'r"^(?P<code>\\d+) \\(0x[0-9A-F]+\\)"': [],
        'r"^PCI\\\\VEN_(?P<vendor>[0-9A-F]{4})&DEV_(?P<device>[0-9A-F]{4})"': [],
        'r\'^[A-Za-z0-9_]+(\\\\[^\\\\"\\x00-\\x1f]+)+$\'': [],
    },
    'plugins/plugin_utils/windows/node/_powershell_literals.py': {
        '"([%s])" % SINGLE_QUOTES': [],
    },
    'plugins/plugin_utils/windows/rungs/_reset_dispatch.py': {
        'r"^S-1-\\d+(-\\d+)*$"': [],
    },
    'plugins/plugin_utils/windows/tools/_interactive_sessions.py': {
        'r"0x[0-9A-Fa-f]{4,}|\\[\\d+\\]|\\b\\d{3,}\\b"': [],
        'r"(?:^\\s*|\\s{2,})(\\S)"': [],
    },
    'plugins/plugin_utils/windows/_node_snapshot.py': {
        'r"^PCI\\\\VEN_([0-9A-F]{4})&DEV_([0-9A-F]{4})(?:&SUBSYS_([0-9A-F]{8}))?(?:&REV_([0-9A-F]{2}))?\\\\"': [],
    },
    'plugins/plugin_utils/windows/tools/_taskkill_tree.py': {
        'r\'^SUCCESS: The process (?:"[^"]*" )?with PID (?P<pid>\\d+)\' + _CHILD + r" has been terminated\\.$"': [],
        'r\'^ERROR: The process (?:"[^"]*" )?with PID (?P<pid>\\d+)\' + _CHILD + r" could not be terminated\\.$"': [],
        'r\'^ERROR: The process "(?P<what>[^"]*)" not found\\.$\'': [],
        'r"^Reason: (?P<reason>.*)$"': [],
    },
    'plugins/plugin_utils/windows/tools/_wsl_cli.py': {
        'r"^/proc/(\\d+)/fd/\\d+$"': [],
        'r"^[A-Za-z0-9._-]+$"': [],
        'r"\\bWsl/(?:[A-Za-z]+/)*%s\\b" % NOT_INSTALLED_ERROR_CODE': [],
    },
    'plugins/plugin_utils/windows/protect/_wsl_vm_identity.py': {
        'r"^S-1-5-83-1-(\\d+)-(\\d+)-(\\d+)-(\\d+)$"': [],
        'r"\\{?([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})\\}?$"': [],
    },
}

# Names a pattern's source uses that are a function's own (a parameter): what they hold when it runs.
LOCALS = {
    ("plugins/module_utils/_safe_files.py", "path"): "/var/lib/gpuops/watch-state.json",
    ("plugins/module_utils/scheduler/_slurm.py", "marker"): "gpuops: reclaiming stuck GPU memory",
}
# The operator's own pattern (gpu_kill name_pattern, cmdline_pattern): not ours to make linear; what it reads is bounded
# (test_an_operators_pattern_reads_a_bounded_command_line).
OPERATORS = {("plugins/module_utils/kill/_kill.py", "params[option]")}


def _sources():
    for base in ("plugins", "extensions"):
        for directory, _dirs, files in os.walk(os.path.join(ROOT, base)):
            for name in sorted(files):
                if name.endswith(".py"):
                    path = os.path.join(directory, name)
                    yield os.path.relpath(path, ROOT), path


def _sites():
    """(file, pattern source, flags source or None) of every re.<call>(...) in plugins/ and extensions/."""
    found = []
    for rel, path in _sources():
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
        for node in ast.walk(ast.parse(text)):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in CALLS
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "re" and node.args):
                continue
            at = FLAGS_AT[node.func.attr]
            flags = ast.get_source_segment(text, node.args[at]) if len(node.args) > at else None
            flags = next((ast.get_source_segment(text, kw.value) for kw in node.keywords if kw.arg == "flags"), flags)
            found.append((rel, " ".join(ast.get_source_segment(text, node.args[0]).split()), flags))
    return found


ALL_SITES = _sites()


def test_every_pattern_is_listed():
    """A pattern added (or changed) in plugins/ or extensions/ needs its worst inputs here, or this fails naming it."""
    missing = [(rel, source) for rel, source, _flags in ALL_SITES
               if source not in SITES.get(rel, {}) and (rel, source) not in OPERATORS]
    assert not missing, "patterns without a worst-input entry in SITES: %r" % missing
    listed = set((rel, source) for rel, sources in SITES.items() for source in sources)
    gone = listed - set((rel, source) for rel, source, _flags in ALL_SITES)
    assert not gone, "SITES lists patterns no longer in the code: %r" % sorted(gone)
    assert len(ALL_SITES) > 80  # the scan itself works: the code holds this many


def _compiled(rel, source, flags):
    module = importlib.import_module("ansible_collections.gpuops.remediation." + rel[:-3].replace("/", "."))
    names = dict(vars(module), re=re)
    names.update(dict((name, value) for (where, name), value in LOCALS.items() if where == rel))
    # The code's own expression, as the AST gave it.
    pattern = eval("(%s)" % source, names)  # pylint: disable=eval-used
    return re.compile(pattern, eval(flags, names) if flags else 0) if isinstance(pattern, str) else pattern


def _literals(pattern):
    """The pattern's literal characters, and its literal lead (what a match starts with)."""
    chars, lead = set(), ""
    leading = True

    def walk(items, top):
        nonlocal lead, leading
        for op, arg in items:
            if op is sre_parse.LITERAL:
                chars.add(chr(arg))
                if top and leading:
                    lead += chr(arg)
                continue
            if top:
                leading = leading and op is sre_parse.AT
            for sub in (arg if isinstance(arg, (list, tuple)) else [arg]):
                if isinstance(sub, sre_parse.SubPattern):
                    walk(sub, False)
                elif isinstance(sub, (list, tuple)):
                    for part in sub:
                        if isinstance(part, sre_parse.SubPattern):
                            walk(part, False)
                        elif isinstance(part, tuple) and len(part) == 2 and part[0] is sre_parse.LITERAL:
                            chars.add(chr(part[1]))

    walk(sre_parse.parse(pattern.pattern if isinstance(pattern.pattern, str) else pattern.pattern.decode(), pattern.flags), True)
    return chars, lead


def _inputs(compiled, extra):
    chars, lead = _literals(compiled)
    units = sorted(chars | set(" \ta0A[=:.,-_'\"/\\"))
    pairs = [("", unit) for unit in units] + [(lead, unit) for unit in units if lead] + list(extra)
    makers = []
    for prefix, unit in pairs:
        makers.append(lambda size, prefix=prefix, unit=unit: prefix + unit * max(1, (size - len(prefix)) // len(unit)) + "\x00")
        makers.append(lambda size, prefix=prefix, unit=unit: (prefix + unit) * max(1, size // len(prefix + unit)) + "\x00")
    return makers


def _seconds(work, inputs):
    """The least of three times of running `work` over every input (each time a mean over at least 50 ms of runs, so
    that the machine's other work averages out)."""
    best = None
    for _round in range(3):
        runs, started = 0, time.perf_counter()
        while True:
            for text in inputs:
                work(text)
            runs += 1
            took = time.perf_counter() - started
            if took >= 0.05:
                break
        best = took / runs if best is None else min(best, took / runs)
    return best


def _growth(work, makers, small):
    return _seconds(work, [make(8 * small) for make in makers]) / _seconds(work, [make(small) for make in makers])


def _in_child(target, *args):
    """target(*args) in a child process (a pattern that never ends is killed at the deadline): its result."""
    context = multiprocessing.get_context("fork")
    receive, send = context.Pipe(duplex=False)

    def run():
        try:
            send.send(("ok", target(*args)))
        except Exception as exc:  # pylint: disable=broad-except
            # reported to the parent, which fails
            send.send(("error", repr(exc)))

    child = context.Process(target=run)
    child.start()
    try:
        assert receive.poll(DEADLINE), "no answer within %d s: the time is not linear in the input (exponential?)" % DEADLINE
        status, value = receive.recv()
    finally:
        child.kill()
        child.join(30)
    assert not child.is_alive(), "the child %d did not end within 30 s of SIGKILL" % child.pid
    assert status == "ok", value
    return value


def _pattern_growth(rel, source, flags):
    compiled = _compiled(rel, source, flags)
    makers = _inputs(compiled, SITES[rel][source])
    growth = _growth(lambda text: [None for _match in compiled.finditer(text)], makers, SMALL)
    for _again in range(2):  # the machine may have been busy: a pattern is linear when one try says so
        if growth < GROWTH_BOUND:
            break
        growth = min(growth, _growth(lambda text: [None for _match in compiled.finditer(text)], makers, SMALL))
    return growth


@pytest.mark.parametrize("rel, source, flags", [site for site in ALL_SITES if (site[0], site[1]) not in OPERATORS],
                         ids=lambda value: value if isinstance(value, str) and len(value) < 60 else None)
def test_every_pattern_is_linear_on_its_worst_inputs(rel, source, flags):
    if source not in SITES.get(rel, {}):
        pytest.fail("%s: %s has no worst-input entry (test_every_pattern_is_listed)" % (rel, source))
    growth = _in_child(_pattern_growth, rel, source, flags)
    assert growth < GROWTH_BOUND, "%s: %s: 8 times the input took %.1f times as long" % (rel, source, growth)


# ---------------------------------------------------------------- the parsers, fed 1 MiB

MIB = 1 << 20
XID = "NVRM: Xid (PCI:0000:01:00): 13, pid=1, name=x, "


def _kernel_log(text):
    from ansible_collections.gpuops.remediation.plugins.module_utils.probes._kernel_log import parse_kernel_log

    return parse_kernel_log(text, now=1796032800.0)


def _kernel_lines(text):
    from ansible_collections.gpuops.remediation.plugins.plugin_utils.eda._source_shared import Throttle
    from ansible_collections.gpuops.remediation.plugins.plugin_utils.eda._kernel_log_source import KernelLines

    return KernelLines("node7", {}, Throttle(0)).feed(text.split("\n"), 1796032800.0)


def _remediation(text):
    from ansible_collections.gpuops.remediation.plugins.plugin_utils.eda._kernel_log_source import remediation_of

    return [remediation_of(line, "node7") for line in text.split("\n")]


def _journal(text):
    from ansible_collections.gpuops.remediation.plugins.plugin_utils.eda._source_shared import Throttle
    from ansible_collections.gpuops.remediation.plugins.plugin_utils.eda._kernel_log_source import KernelLines, journal_lines

    entry = {"_TRANSPORT": "kernel", "MESSAGE": text, "__REALTIME_TIMESTAMP": "1796032800000000", "_HOSTNAME": "node7"}
    return KernelLines("node7", {}, Throttle(0)).feed(journal_lines(entry), 1796032800.0)


def _query_csv(text):
    from ansible_collections.gpuops.remediation.plugins.module_utils.probes._nvsmi import parse_query_csv

    try:
        return parse_query_csv(text)
    except ValueError:  # its refusal of a row that does not fit the header: an answer too
        return None


def _modprobe(text):
    from ansible_collections.gpuops.remediation.plugins.module_utils.probes._kmod import parse_modprobe_errors

    return parse_modprobe_errors(text)


def _lsmod(text):
    from ansible_collections.gpuops.remediation.plugins.module_utils.probes._kmod import parse_lsmod

    return parse_lsmod(text)


def _scontrol(text):
    from ansible_collections.gpuops.remediation.plugins.module_utils.scheduler._slurm import parse_nodes

    return parse_nodes(text)


def _mig_tables(text):
    from ansible_collections.gpuops.remediation.plugins.module_utils.probes import _mig_instances as mig

    return mig.parse_lgi(text), mig.parse_lci(text), mig.parse_list_uuids(text)


def _unit_state(text):
    """Exec lines only (a property said twice ends the parse): every line is read."""
    from ansible_collections.gpuops.remediation.plugins.module_utils.kill._left_behind import parse_unit_state

    return parse_unit_state(text)


# (parser, [one unit of its worst input]): each unit repeated to the size, a line's worth or one line of it all.
PARSERS = [
    (_kernel_log, ["[" * 1000 + XID, "kernel: [" + "[" * 400 + "] " + XID + "to 0x1 (" * 900, "Dec 6 h kernel: " + XID + "RST: " + " " * 4000,
                   "Dec 6 h kernel: NVRM: Xid (PCI:0000:01:00" + " " * 4000 + "x", "Dec 6 h kernel: NVRM: Xid (PCI:0000:01:00): 1, name=" + "'," * 3000,
                   "[" * MIB + XID]),
    (_kernel_lines, ["[" * 1000 + XID, "h alice[1]: " + "gpuops-remediation: " * 200 + "a=" * 2000, "h kernel: " + XID + "a" * 9000]),
    (_remediation, ["h gpuops-remediation: " + "a=" * 3000 + " x", "h gpuops-remediation: " + "a=" * 3000,
                    "h gpuops-remediation[" + "1" * 3000, "gpuops-remediation " * 500,
                    "h gpuops-remediation: " + "a=" * MIB]),
    (_journal, [XID + "to 0x1 (" * 500, "[" * 5000 + XID]),
    (_query_csv, ["index, name [" + "[" * 4000 + ", memory.used [MiB]", "0, " + "a, " * 3000, " " * 8000]),
    (_modprobe, ["modprobe: FATAL: Module x is in use by: a" + " " * 8000 + "b", "rmmod: ERROR: could not remove module '" + "a" * 8000,
                 "Module " * 2000]),
    (_lsmod, ["nvidia 1 " + "1" * 18 + " " + "a," * 4000, "nvidia " + "1 " * 4000]),
    (_scontrol, ["NodeName=" * 2000 + " State=" + "a" * 8000, "NodeName=n State=IDLE Reason=" + " [a@" * 3000]),
    (_unit_state, ["ExecStart={ path=/bin/sh ; argv[]=" + " ; pid=1" * 2000 + " ; pid=812 ; code=exited ; status=0 }",
                   "ExecStartPost={ " + " ; pid=" * 4000 + "1 }",
                   "ExecStartPre={ " + "{ ; " * 3000 + " ; pid=" + "9" * 4000 + " }"]),
    (_mig_tables, ["|  0  MIG 1g.10gb  19  1  0:1  |", "|" + " 0 " * 4000 + "|", "| 0 0 MIG " + "1:" * 4000 + " |", "GPU 0: x",
                   "  MIG 1g.10gb Device " + "0: " * 3000 + "(UUID: MIG-" + "a" * 4000 + ")", "|" * 8000]),
]


def _text_of(units, size):
    """`size` characters of the units: each a line repeated, and (the last unit) as one line."""
    lines = []
    total = 0
    while total < size:
        for unit in units[:-1] or units:
            lines.append(unit)
            total += len(unit) + 1
    return "\n".join(lines)[:size] + "\n" + units[-1][:size]


def _parser_growth(parser, units):
    inputs = [_text_of(units, MIB // 8)], [_text_of(units, MIB)]
    growth = _seconds(parser, inputs[1]) / _seconds(parser, inputs[0])
    return growth if growth < GROWTH_BOUND else min(growth, _seconds(parser, inputs[1]) / _seconds(parser, inputs[0]))


@pytest.mark.parametrize("parser, units", PARSERS, ids=[parser.__name__ for parser, _units in PARSERS])
def test_every_parser_of_node_text_is_linear_up_to_a_mebibyte(parser, units):
    growth = _in_child(_parser_growth, parser, units)
    assert growth < GROWTH_BOUND, "%s: 8 times the input (1 MiB) took %.1f times as long" % (parser.__name__, growth)


def _selection_growth(pattern):
    from ansible_collections.gpuops.remediation.plugins.module_utils.kill._kill import HolderSelection

    params = {"gpus": None, "classes": ["compute"], "users": None, "min_memory_mib": None, "orphans_only": False}
    selection = HolderSelection(params, {"cmdline_pattern": re.compile(pattern), "name_pattern": re.compile(pattern)})

    def select(text):
        holder = {"pid": 1, "class": "compute", "gpus": [0], "name": text[:15], "cmdline": [text, text]}
        return selection.matches(holder, {0})

    return _seconds(select, ["a=" * (MIB // 2)]) / _seconds(select, ["a=" * (MIB // 16)])


def test_an_operators_pattern_reads_a_bounded_command_line():
    """gpu_kill's name_pattern and cmdline_pattern are the operator's, backtracking included (here quadratic): a user's
    2 MiB command line costs what 4096 characters of it cost."""
    growth = _in_child(_selection_growth, r"=.*;")
    assert growth < 3, "a command line 8 times longer took %.1f times as long to select" % growth
