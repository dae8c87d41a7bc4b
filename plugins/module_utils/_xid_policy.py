# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The site's Xid policy: which rung an Xid asks for, where a site overrides NVIDIA's catalog.

One owner for "the rung this kernel event asks for" (event_rung): the verdict (_verdict._xid_findings) and the
event sources of extensions/eda read it. The policy (`gpuops_xid_policy`, a mapping of Xid code to rung, see
docs/eda.md) is checked by parse_policy and written into each parsed event by apply_policy, so that every later
reader of the event sees the site's word, with NVIDIA's catalog action kept beside it.
"""

from __future__ import annotations

# NVIDIA's catalog action -> the rung it asks for (the other actions ask for none: they are for a person).
XID_RUNGS = {"restart_app": "kill", "reset_gpu": "reset", "reboot": "reboot"}
# The rungs a policy may name, and the catalog action that stands for each in an event.
POLICY_ACTIONS = {"none": "none", "kill": "restart_app", "reset": "reset_gpu", "reboot": "reboot"}
POLICY_OPTION = "xid_policy"


class PolicyError(ValueError):
    """A policy entry that is not an Xid code mapped to one of POLICY_ACTIONS; the message names it."""


def _code(key, option):
    if isinstance(key, bool):
        raise PolicyError("%s: the Xid code %r is not a number (codes are integers 1..999)" % (option, key))
    text = str(key).strip()
    # ASCII digits only: str.isdigit() also takes "²" (which int() refuses) and other scripts' digits.
    if not (text.isascii() and text.isdigit()) or not 1 <= int(text) <= 999:
        raise PolicyError("%s: the Xid code %r is not a number 1..999" % (option, key))
    return int(text)


def parse_policy(policy, option=POLICY_OPTION):
    """{xid code (int): rung} from a mapping whose keys are codes (int or digits) and whose values are rungs.

    Raises PolicyError naming the option, the code and the value of the first bad entry; None or {} is no policy.
    """
    if policy is None:
        return {}
    if not isinstance(policy, dict):
        raise PolicyError("%s must be a mapping of Xid code to rung, got %r" % (option, policy))
    parsed = {}
    for key, rung in policy.items():
        code = _code(key, option)
        if not isinstance(rung, str) or rung not in POLICY_ACTIONS:
            raise PolicyError("%s: Xid %s maps to %r, which is not a rung it can ask for (one of %s)"
                              % (option, code, rung, ", ".join(sorted(POLICY_ACTIONS))))
        if code in parsed and parsed[code] != rung:
            raise PolicyError("%s: Xid %s is given twice, as %r and %r" % (option, code, parsed[code], rung))
        parsed[code] = rung
    return parsed


def apply_policy(events, policy):
    """Write the site's rung into each Xid event of the policy (in place), keeping NVIDIA's action as catalog_action.

    `policy` is parse_policy's result. Returns the list.
    """
    for event in events:
        rung = policy.get(event.get("xid")) if event.get("kind") == "xid" else None
        if rung is None:
            continue
        catalog = dict(event.get("catalog") or {})
        catalog.setdefault("catalog_action", catalog.get("action"))
        catalog["action"] = POLICY_ACTIONS[rung]
        catalog["policy"] = "site"
        event["catalog"] = catalog
    return events


def event_rung(event):
    """The rung a kernel event (parse_kernel_log's shape, after apply_policy) asks for, or None."""
    return XID_RUNGS.get((event.get("catalog") or {}).get("action"))
