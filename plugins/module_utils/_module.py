# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The AnsibleModule every module of the collection runs as.

Inputs are taken at their word. Ansible's own conversion reads ``true`` as the int 1 (a bool is an int in
Python), truncates nothing but turns a list given for a string into its printed form (a regular expression
that matches almost anything), and names neither the value of a float nor of a bool it cannot convert. For a
module that ends processes each of these can select the wrong one, so a value of the wrong kind is refused
before anything runs, naming the option and the value.

(The commands a module runs go through _command.CommandRunner, which runs them in the C locale.)
"""

from __future__ import annotations

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpuops.remediation.plugins.module_utils._option_check import kind_error


def input_errors(argument_spec, params):
    """{given name: message} for each option whose raw value is of the wrong kind, naming it and the value."""
    errors = {}
    for option, spec in argument_spec.items():
        kind = spec.get("type", "str")
        if not isinstance(kind, str):
            continue
        for name in [option] + list(spec.get("aliases") or []):
            if name not in params:
                continue
            value = params[name]
            if kind == "list" and isinstance(value, list) and isinstance(spec.get("elements"), str):
                bad = [kind_error("%s[%d]" % (name, position), element, spec["elements"]) for position, element in enumerate(value)]
                bad = [error for error in bad if error]
                if bad:
                    errors[name] = "; ".join(bad)
                continue
            error = kind_error(name, value, kind)
            if error:
                errors[name] = error
    return errors


PLACEHOLDERS = {"list": [], "dict": {}, "str": "", "path": "", "int": 0, "float": 0.0, "bool": False}


def _placeholder(spec):
    if spec.get("default") is not None:
        return spec["default"]
    if spec.get("choices"):
        return spec["choices"][0]
    return PLACEHOLDERS.get(spec.get("type", "str"))


class GpuModule(AnsibleModule):
    """AnsibleModule with strict input kinds."""

    def __init__(self, argument_spec, **kwargs):
        self._strict_spec = argument_spec
        self._input_errors = {}
        super().__init__(argument_spec=argument_spec, **kwargs)
        if self._input_errors:
            self.fail_json(msg="; ".join(self._input_errors[name] for name in sorted(self._input_errors)), changed=False)

    def _load_params(self):
        super()._load_params()
        # None is no answer (AWX sends an empty survey answer as None, ansible/awx#16205): the option's default applies.
        # So is '' for an option that is not a string: ansible-core 2.16 to 2.18 template a role's None as ''.
        for name in [name for name, value in self.params.items() if value is None or (value == "" and self._not_text(name))]:
            del self.params[name]
        self._input_errors = input_errors(self._strict_spec, self.params)
        for name in self._input_errors:
            # Put a harmless value of the right kind in place of the bad one, so that Ansible's own checks do not
            # fail first with a message that does not name it; __init__ then fails with ours, before anything runs.
            self.params[name] = _placeholder(self._spec_of(name))

    def _not_text(self, name):
        return self._spec_of(name).get("type", "str") not in ("str", "raw")

    def _spec_of(self, name):
        for option, spec in self._strict_spec.items():
            if name == option or name in (spec.get("aliases") or ()):
                return spec
        return {}
