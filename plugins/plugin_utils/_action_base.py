# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What every action plugin of the collection shares: it works from the controller, in check mode too, never async;
its options are checked against its argument spec; the errors it knows become a task failure with their message."""

from __future__ import annotations

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.gpuops.remediation.plugins.plugin_utils._data import plain


class ControllerAction(ActionBase):
    TRANSFERS_FILES = False
    _supports_check_mode = True
    _supports_async = False
    ARGUMENT_SPEC = {}
    REQUIRED_IF = ()
    # Exceptions whose message is the failure the user reads (bad input, a node that does not answer).
    FAILURES = ()

    def argument_spec(self):
        return self.ARGUMENT_SPEC

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        dummy, args = self.validate_argument_spec(self.argument_spec(), required_if=list(self.REQUIRED_IF))
        try:
            result.update(self.act(plain(args), task_vars or {}))
        except self.failures() as exc:
            raise AnsibleActionFail(str(exc)) from None
        return result

    def failures(self):
        """The exceptions whose message is the failure: FAILURES, or those of code the plugin imports only when it runs."""
        return self.FAILURES

    def act(self, args, task_vars):
        """The plugin's work: the result's keys."""
        raise NotImplementedError
