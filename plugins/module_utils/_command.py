# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one way a module runs a command on the node (after community.general's ``cmd_runner``, simpler).

Every command goes through :class:`CommandRunner`:

- argv only, never a shell string: a value read from the node can never become shell syntax;
- the C locale (``LC_ALL=C``, ``LANG=C``) in the child's environment, so output parses the same on any node;
- ``probe(argv, timeout=...)``: a command that reads the node, run in a child under the probe deadline where it can
  hang on a wedged driver (``ProbeTimeout``/``ProbeFailed`` as from every probe);
- ``act(argv, action, ...)``: a command that changes the node. In check mode nothing runs and the result says what
  would have run; otherwise the journal's intent is written before it runs and its outcome after, in one call.
"""

from __future__ import annotations

from ansible_collections.gpuops.remediation.plugins.module_utils.probes._deadline import run_with_deadline

C_LOCALE = {"LANG": "C", "LC_ALL": "C", "LC_MESSAGES": "C", "LC_NUMERIC": "C"}


class CommandResult(tuple):
    """(rc, out, err), unpacked like AnsibleModule.run_command's answer; also argv and whether it was skipped."""

    def __new__(cls, rc, out, err, argv, skipped=False):
        result = tuple.__new__(cls, (rc, out, err))
        result.argv = list(argv)
        result.skipped = skipped
        return result

    @property
    def rc(self):
        return self[0]

    @property
    def out(self):
        return self[1]

    @property
    def err(self):
        return self[2]


def _argv(argv):
    if isinstance(argv, (str, bytes)) or not argv:
        raise TypeError("a command is a non-empty argv list, never a shell string: %r" % (argv,))
    return [str(part) for part in argv]


class CommandRunner:
    """Runs the commands of one module: `module` is its AnsibleModule, `journal` the run's Journal (for act())."""

    def __init__(self, module, journal=None):
        self.module = module
        self.journal = journal
        # AnsibleModule.run_command adds this to the child's environment (as cmd_runner's environ_update does).
        module.run_command_environ_update = dict(getattr(module, "run_command_environ_update", None) or {}, **C_LOCALE)

    def _run(self, argv):
        rc, out, err = self.module.run_command(argv)
        return rc, out, err

    def probe(self, argv, timeout=None):
        """Run a command that only reads the node; with `timeout`, in a child under that deadline (whose process
        group is killed past it, the command with it). Raises ProbeTimeout or ProbeFailed as run_with_deadline does."""
        argv = _argv(argv)
        if timeout is None:
            return CommandResult(*self._run(argv), argv=argv)
        rc, out, err = run_with_deadline(lambda: list(self._run(argv)), timeout, own_group=True)
        return CommandResult(rc, out, err, argv=argv)

    def act(self, argv, action, journal_argv=True, keep_stdout=False, outcome=None, succeeded=None, **details):
        """Run a command that changes the node, journalled: the intent `action` with `details` (and argv unless
        journal_argv is false) before, the outcome (rc, stderr, stdout when keep_stdout, and `outcome`) after; ok when
        `succeeded(rc, out, err)` says so (default: rc 0) - a tool that exits 0 on a failure it prints must not leave
        an ok outcome (a reset's answers earlier evidence).
        In check mode nothing runs and nothing is journalled: the result is skipped, rc 0, with the argv that would run."""
        argv = _argv(argv)
        if getattr(self.module, "check_mode", False):
            return CommandResult(0, "", "", argv=argv, skipped=True)
        if journal_argv:
            details["argv"] = argv
        entry = self.journal.intent(action, **details)
        rc, out, err = self._run(argv)
        written = {"rc": rc}
        if keep_stdout:
            written["stdout"] = out.strip()
        written["stderr"] = err.strip()
        written.update(outcome or {})
        self.journal.outcome(entry, rc == 0 if succeeded is None else succeeded(rc, out, err), **written)
        return CommandResult(rc, out, err, argv=argv)
