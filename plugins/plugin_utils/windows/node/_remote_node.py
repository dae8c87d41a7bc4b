# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Windows node an action plugin talks to, and the controller side's one switch between real and simulated.

A host whose variable gpuops_windows_sim_root names a directory is the simulated Windows node built there
(_simulated_node); any other host is a real Windows host, on which the stock tools run through ansible.windows:
win_command (argv lists only) and win_powershell (the named scripts of _powershell_scripts, values as parameters).
Both nodes answer the same two calls, so everything above them runs the same code on either.
"""

from __future__ import annotations

from collections import namedtuple

from ansible.errors import AnsibleConnectionFailure

from ansible_collections.gpuops.remediation.plugins.plugin_utils._data import templated
from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.node import _output_encoding, _powershell_scripts

try:
    # The psrp connection plugin lets some of these through instead of AnsibleConnectionFailure (as ansible.windows notes).
    from requests.exceptions import RequestException
except ImportError:  # pragma: no cover - requests comes with the winrm and psrp connections
    RequestException = AnsibleConnectionFailure

SIM_ROOT_VAR = "gpuops_windows_sim_root"
WIN_COMMAND = "ansible.windows.win_command"
WIN_POWERSHELL = "ansible.windows.win_powershell"

# rc, stdout and stderr as text (decoded by evidence), and the encoding the evidence showed for stdout.
CommandResult = namedtuple("CommandResult", "rc stdout stderr encoding")


class WindowsNodeError(Exception):
    """A tool or script could not be run on the node at all (not: it ran and failed); the message says why."""


class ConnectionDropped(WindowsNodeError):
    """The connection to the host broke during a call: what the call did on the host is not known from its answer."""


def windows_node(action, task_vars):
    """The node the task acts on: simulated when its host variable SIM_ROOT_VAR is set, else the real host."""
    root = host_variable(action, task_vars, SIM_ROOT_VAR)
    if root:
        return SimulatedNode(str(root), _connection_user(action))
    return TargetNode(action, task_vars, _connection_user(action))


def host_variable(action, task_vars, name):
    """A variable of the host the task runs on (the delegated host's, when the task is delegated), templated."""
    variables = task_vars
    delegate = getattr(action._task, "delegate_to", None)
    if delegate:
        variables = (task_vars.get("ansible_delegated_vars") or {}).get(delegate) or {}
    value = variables.get(name)
    return templated(action, value) if value is not None else None


def _connection_user(action):
    """Whom the tools run as: the become user when the task becomes one, else the connection's user."""
    context = action._play_context
    if context.become and context.become_user:
        return context.become_user
    return context.remote_user


def _decoded(node, program, stdout, stderr, rc):
    """rc and the output of `program` decoded by evidence; a console tool's text in a code page with the node's OEM code
    page (asked only then); wsl.exe's never (_output_encoding.UNICODE_TOOLS)."""
    stdout, stderr = stdout or "", stderr or ""
    if not _output_encoding.writes_code_page(program):
        out, err = _output_encoding.decode_transported(stdout, unicode_only=True), _output_encoding.decode_transported(stderr, unicode_only=True)
        return CommandResult(rc, out.text, err.text, out.encoding)
    code_page = node.oem_code_page() if _output_encoding.needs_code_page(stdout) or _output_encoding.needs_code_page(stderr) else None
    out = _output_encoding.decode_transported(stdout, code_page)
    err = _output_encoding.decode_transported(stderr, code_page)
    return CommandResult(rc, out.text, err.text, out.encoding)


def read_code_page(node):
    """The node's OEM code page number as its registry gives it (OEMCP), or None when the code_page script cannot say."""
    try:
        answer = node.powershell("code_page", {}, read_only=True)
    except WindowsNodeError:
        return None
    value = str(answer.get("oem") or "").strip()
    return int(value) if value.isdigit() else None


class _CodePage:
    """The node's OEM code page, read once (the registry's OEMCP), the first time a tool writes text in a code page."""

    _code_page = None
    _code_page_read = False

    def oem_code_page(self):
        if not self._code_page_read:
            self._code_page = read_code_page(self)
            self._code_page_read = True
        return self._code_page


class TargetNode(_CodePage):
    """A real Windows host, through the action plugin's connection. Cannot run here (no Windows host): see docs/windows.md."""

    simulated = False

    def __init__(self, action, task_vars, user=None):
        self._action = action
        self._task_vars = task_vars
        self.user = user  # whom the tools run as (the become user, else the connection's), as far as the play says

    def command(self, argv, read_only=False):
        """Run argv (a list: win_command quotes each element by the C runtime's rules) -> CommandResult.

        The output is read as ISO-8859-1, one character per byte, and decoded here by evidence (wsl.exe writes
        UTF-16LE, other tools the console's OEM code page, which is read from the host once, or UTF-8). A non-zero
        exit is a result, not an error.
        """
        result = self._execute(WIN_COMMAND, {"argv": [str(part) for part in argv],
                                             "output_encoding_override": _output_encoding.TRANSPORT_ENCODING}, read_only)
        if "rc" not in result:
            raise WindowsNodeError("%s could not be run: %s" % (argv[0], result.get("msg") or result))
        return _decoded(self, argv[0], result.get("stdout"), result.get("stderr"), int(result["rc"]))

    def powershell(self, name, parameters=None, read_only=True):
        """Run the named script of _powershell_scripts with `parameters` bound as data -> its $Ansible.Result."""
        result = self._execute(WIN_POWERSHELL, {"script": _powershell_scripts.SCRIPTS[name], "parameters": dict(parameters or {}),
                                                "error_action": "stop"}, read_only)
        if result.get("failed"):
            errors = "; ".join(str(record.get("message") or record) for record in result.get("error") or [])
            raise WindowsNodeError("the %s script failed: %s" % (name, errors or result.get("msg")))
        return result.get("result") or {}

    def reconnect(self):
        """Drop the connection plugin's session so that the next call opens a new one (what ansible.windows'
        win_reboot does before it tries the host again: a WinRM shell cut by the host is not reused)."""
        connection = self._action._connection
        for step in (connection.close, getattr(connection, "reset", None)):
            if step is None:
                continue
            try:
                step()
            except (AnsibleConnectionFailure, RequestException, OSError):
                pass  # the next call says whether the host answers again

    def _execute(self, module_name, module_args, read_only):
        task = self._action._task
        saved = task.check_mode
        # A probe changes nothing: it runs in check mode too, as `check_mode: false` on a task would run it.
        task.check_mode = saved and not read_only
        try:
            result = self._action._execute_module(module_name=module_name, module_args=module_args, task_vars=self._task_vars)
        except (AnsibleConnectionFailure, RequestException) as exc:
            raise ConnectionDropped("the connection to the host broke: %s" % exc) from None
        finally:
            task.check_mode = saved
        if result.get("unreachable"):
            raise ConnectionDropped("the host is unreachable: %s" % result.get("msg"))
        return result


class SimulatedNode(_CodePage):
    """The simulated Windows node under `root` (_simulated_node), answering as the tools and scripts do, as `user`."""

    simulated = True

    def __init__(self, root, user=None):
        self.root = root
        self.user = user

    def reconnect(self):
        """Nothing to reopen: the simulated node is files on the controller, and never drops a connection."""

    def command(self, argv, read_only=False):
        # only a simulated node needs it
        from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.simulation import _simulated_node  # pylint: disable=import-outside-toplevel
        del read_only  # the simulation answers check mode's probes as it answers any
        try:
            answer = _simulated_node.run_command(self.root, [str(part) for part in argv], self.user)
        except _simulated_node.WinSimError as exc:
            raise WindowsNodeError(str(exc)) from None
        return _decoded(self, argv[0], _simulated_node.transported(answer.stdout), _simulated_node.transported(answer.stderr), answer.rc)

    def powershell(self, name, parameters=None, read_only=True):
        # only a simulated node needs it
        from ansible_collections.gpuops.remediation.plugins.plugin_utils.windows.simulation import _simulated_node  # pylint: disable=import-outside-toplevel
        del read_only
        if name not in _powershell_scripts.SCRIPTS:
            raise WindowsNodeError("no script named %r" % (name,))
        try:
            return _simulated_node.run_script(self.root, name, dict(parameters or {}), self.user)
        except _simulated_node.WinSimError as exc:
            raise WindowsNodeError(str(exc)) from None
