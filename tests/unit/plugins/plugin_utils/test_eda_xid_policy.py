# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Xid policy file the sources read (load_policy, parse_policy): codes in digits other than ASCII named, a code
written as a string and as an integer one code."""

import json

import pytest

from ansible_collections.gpuops.remediation.plugins.module_utils._xid_policy import PolicyError, parse_policy
from ansible_collections.gpuops.remediation.plugins.plugin_utils.eda._kernel_log_source import load_policy
from ansible_collections.gpuops.remediation.plugins.plugin_utils.eda._source_shared import OptionError


# ---------------------------------------------------------------- the Xid policy

@pytest.mark.parametrize("code", ["\u00b2", "\u0667\u0669", "\uff17\uff19"])
def test_policy_code_in_digits_other_than_ascii_is_named(code, tmp_path):
    """str.isdigit() takes a superscript two (int() then raised a bare ValueError naming no option) and Arabic-Indic or
    full-width digits (taken as Xid 79): each is named as no Xid code, in the inline mapping and in the file."""
    with pytest.raises(PolicyError, match="xid_policy: the Xid code .* is not a number 1..999"):
        parse_policy({code: "reset"})
    path = tmp_path / "gpuops_xid_policy.yml"
    path.write_text(json.dumps({"gpuops_xid_policy": {code: "reset"}}), encoding="utf-8")
    with pytest.raises(OptionError, match="gpu_kernel_log: xid_policy_file .*: the Xid code"):
        load_policy("gpu_kernel_log", None, str(path))


def test_policy_codes_as_strings_and_integers_are_one_code():
    assert parse_policy({"79": "reboot", 79: "reboot", " 119 ": "reset"}) == {79: "reboot", 119: "reset"}
    with pytest.raises(PolicyError, match=r"Xid 79 is given twice, as 'reboot' and 'reset'"):
        parse_policy({"79": "reboot", 79: "reset"})
    with pytest.raises(PolicyError, match=r"Xid 79 maps to 'Reset', which is not a rung"):
        parse_policy({79: "Reset"})
    with pytest.raises(PolicyError, match=r"Xid 79 maps to 3"):
        parse_policy({79: 3})
