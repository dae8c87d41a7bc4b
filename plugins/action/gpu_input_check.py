# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpu_input_check: every input of a playbook checked once, on the controller, before any node is touched
(plugin_utils/_inputs.py)."""

from __future__ import annotations

from ansible.errors import AnsibleActionFail
from ansible.utils.vars import load_extra_vars

from ansible_collections.gpuops.remediation.plugins.plugin_utils._action_base import ControllerAction
from ansible_collections.gpuops.remediation.plugins.plugin_utils._data import templated
from ansible_collections.gpuops.remediation.plugins.plugin_utils.eda._event_target import event_policy_error, event_target_error
from ansible_collections.gpuops.remediation.plugins.plugin_utils._inputs import (
    PLAYBOOK_OPTIONS, input_errors, policy_errors, role_options, unknown_variables,
)

ROLES = ("gpu_inspect", "gpu_node_prep", "gpu_reclaim", "gpu_remediate", "gpu_watch")


class ActionModule(ControllerAction):
    ARGUMENT_SPEC = dict(
        roles=dict(type="list", elements="str", required=True),
        entry_point=dict(type="str", default="main"),
    )

    def act(self, args, task_vars):
        unknown = [role for role in args["roles"] if role not in ROLES]
        if unknown:
            raise AnsibleActionFail("roles: %s is no role of this collection (%s)" % (", ".join(unknown), ", ".join(ROLES)))
        options = dict(PLAYBOOK_OPTIONS)
        options.update(role_options(args["roles"], args["entry_point"]))
        given = {name: task_vars[name] for name in options if name in task_vars}
        values = templated(self, given)
        # The -e and AWX survey variables (the same extra vars ansible-playbook parsed): a misspelt one would be ignored.
        errors = unknown_variables(load_extra_vars(self._loader), options) + input_errors(values, options)
        errors += policy_errors(self._templar.template(task_vars.get("gpuops_xid_policy")))
        if not errors:
            # A run an event started targets exactly the event's one inventory host (never a group its name stands for).
            target = event_target_error(values.get("gpuops_event_host"), task_vars.get("ansible_play_hosts_all"),
                                        task_vars.get("groups")) or event_policy_error(
                values.get("gpuops_event_xid"), values.get("gpuops_event_policy"), values.get("gpuops_event_rung"),
                self._templar.template(task_vars.get("gpuops_xid_policy")))
            if target:
                return dict(failed=True, msg=target, input_errors=[target], checked=sorted(values))
        if errors:
            return dict(failed=True, msg="invalid input: %s" % "; ".join(errors), input_errors=errors, checked=sorted(values))
        # What a playbook's later include_role of each checked role passes as rolespec_validate: no second check per host.
        return dict(changed=False, checked=sorted(values), input_errors=[], roles=list(args["roles"]),
                    rolespec_validate=dict((role, False) for role in args["roles"]))
