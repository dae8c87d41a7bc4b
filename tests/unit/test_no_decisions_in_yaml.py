# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""No decision and no arithmetic in playbooks/ and roles/*/tasks (issue 21): each lives in one named Python function
(a filter, an action or a module's result), and the YAML only passes values.

Every Jinja expression of those files is lexed with Jinja's own lexer: the `{{ }}` of every value, and the bare
expressions of when/changed_when/failed_when/until/that. Refused everywhere: an inline if/else, the ternary filter, and
arithmetic (+ - * / // % **; a minus that starts a number, as in `lines[-1]`, is no arithmetic). Refused in a value
(anything but those conditions): choosing or comparing - `and`, `or`, `not`, `in`, `is` and the comparisons - as in
`x or 'reset'`. Allowed, as passing values: the `default` filter (`default(omit)`, and `default(x, true)` for a value
that may be empty or null, as an AWX survey sends it), `~` to join text into a path or a name, any other filter that
transforms a value, and comparisons and tests in the conditions of a task (when: x == 'slurm').

VALUE_EXCEPTIONS lists, with the reason, the values allowed to choose.
"""

import os
import re

import jinja2
import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONDITION_KEYS = ("when", "changed_when", "failed_when", "until", "that")
ARITHMETIC = frozenset(["add", "sub", "mul", "div", "floordiv", "mod", "pow"])
# After these tokens a minus starts a number (`[-1]`, `(-2`, `, -3`, `== -1`), it does not subtract.
UNARY_BEFORE = frozenset(["lbracket", "lparen", "comma", "colon", "assign", "eq", "ne", "lt", "lteq", "gt", "gteq",
                          "add", "sub", "mul", "div", "floordiv", "mod", "pow", "variable_begin"])
CHOOSING = frozenset(["and", "or", "not", "in", "is"])
COMPARISONS = frozenset(["eq", "ne", "lt", "lteq", "gt", "gteq"])
# (file, key): why the value may choose.
VALUE_EXCEPTIONS = {
    ("playbooks/reset_gpu.yml", "check_mode"): "a play keyword, evaluated for every task of every host: --check, or the "
    "AWX survey's gpuops_dry_run (a survey cannot pass --check); a filter there would cost every task a plugin lookup",
}
TEMPLATE = re.compile(r"\{\{(.*?)\}\}", re.S)
ENV = jinja2.Environment()


def yaml_files():
    found = []
    for top in ("playbooks", "roles"):
        for directory, dummy, names in os.walk(os.path.join(ROOT, top)):
            relative = os.path.relpath(directory, ROOT)
            if top == "roles" and os.path.basename(relative) != "tasks":
                continue
            found += [os.path.join(relative, name) for name in sorted(names) if name.endswith((".yml", ".yaml"))]
    return sorted(found)


def expressions(node, key=None):
    """Every Jinja expression in a loaded YAML document: (the key it is under, the expression's text)."""
    if isinstance(node, dict):
        for name, value in node.items():
            yield from expressions(value, name)
    elif isinstance(node, list):
        for item in node:
            yield from expressions(item, key)
    elif isinstance(node, str):
        if key in CONDITION_KEYS and "{{" not in node:
            yield key, node
        for match in TEMPLATE.finditer(node):
            yield key, match.group(1)


def decisions(expression, condition=True):
    """What in the expression decides or computes: a list of words, empty when it only passes values.
    condition: the expression is a task's condition (when: ...), where comparing and choosing are its job."""
    found, previous = [], "variable_begin"
    for dummy, kind, value in ENV.lex("{{ %s }}" % expression):
        if kind in ("whitespace",):
            continue
        if kind == "name" and value in ("if", "else"):
            found.append("inline %s" % value)
        elif kind == "name" and value in CHOOSING and not condition:
            found.append("%r in a value" % value)
        elif kind == "name" and value == "ternary" and previous == "pipe":
            found.append("the ternary filter")
        elif kind == "operator":
            operator = jinja2.lexer.operators[value]
            if operator in ARITHMETIC and not (operator == "sub" and previous in UNARY_BEFORE):
                found.append("arithmetic %r" % value)
            elif operator in COMPARISONS and not condition:
                found.append("comparison %r in a value" % value)
            kind = operator
        previous = kind
    return found


def test_the_lexer_sees_what_decides_and_lets_values_pass():
    assert decisions("a if b else c") == ["inline if", "inline else"]
    assert decisions("x | ternary('a', 'b')") == ["the ternary filter"]
    assert decisions("a + b") == ["arithmetic '+'"]
    assert decisions("(n | int) * 2") == ["arithmetic '*'"]
    assert decisions("a - 1") == ["arithmetic '-'"]
    assert decisions("lines[-80:]") == [] and decisions("x == -1") == []
    assert decisions("x | default(omit)") == [] and decisions("playbook_dir ~ '/roles'") == []
    assert decisions("'a + b if c'") == []  # text is no expression
    assert decisions("gpu_reclaim_drain == 'slurm' and x is defined") == []
    assert decisions("x or 'reset'", condition=False) == ["'or' in a value"]
    assert decisions("'a' not in x.roles", condition=False) == ["'not' in a value", "'in' in a value"]
    assert decisions("x.rc == 0", condition=False) == ["comparison '==' in a value"]
    assert decisions("x | default('reset', true)", condition=False) == []


@pytest.mark.parametrize("path", yaml_files())
def test_no_decision_in_jinja(path):
    with open(os.path.join(ROOT, path)) as handle:
        document = yaml.safe_load(handle)
    found = ["%s: {{ %s }}: %s" % (key, " ".join(text.split()), ", ".join(words))
             for key, text in expressions(document)
             for words in [decisions(text, condition=key in CONDITION_KEYS or (path, key) in VALUE_EXCEPTIONS)] if words]
    assert found == [], "%s decides in Jinja (move it into one named Python function):\n%s" % (path, "\n".join(found))


# Answers Python gives the roles as booleans, which no condition may work out again from what they are made of:
# (what recomputing one looks like, the boolean to read instead).
ANSWERED = (
    (re.compile(r"outcome\.status\b"), "gpu_ladder's host_fails (the fact gpu_reclaim_host_fails)"),
    (re.compile(r"breaker_max_(percent|count)\s*\|\s*int\b"), "the breaker_on filter"),
    (re.compile(r"__gpu_remediate_breaker\.refusal\b"), "gpu_breaker's refuses"),
    (re.compile(r"guard_refusal\s*\|\s*length\b"), "the guard_refuses filter (the fleet guard's and the breaker's refusals, joined in Python)"),
)


def answering_results():
    """The registered results of the collection's own modules and actions (their answers are Python's) in playbooks/ and roles/."""
    found = set()

    def walk(node):
        if isinstance(node, dict):
            if "register" in node and any(str(key).startswith("gpuops.remediation.") for key in node):
                found.add(node["register"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)
    for path in yaml_files():
        with open(os.path.join(ROOT, path)) as handle:
            walk(yaml.safe_load(handle))
    return found


ANSWERING = frozenset(answering_results())


def joined_answers(expression, results=ANSWERING):
    """The answers of one result of the collection's modules (results: their registered names) that a condition joins
    with `and`/`or` (as `walk.pending in [...] or walk.drain_followup in [...]`): one decision made in Jinja out of
    Python's answers, which Python should give as one boolean. Empty when the condition reads at most one answer of each
    result, or joins nothing."""
    read, joins, tokens = {}, False, [(kind, value) for dummy, kind, value in ENV.lex("{{ %s }}" % expression) if kind != "whitespace"]
    for index, (kind, value) in enumerate(tokens):
        joins = joins or (kind == "name" and value in ("and", "or"))
        attribute = kind == "name" and value in results and index + 2 < len(tokens) and tokens[index + 1] == ("operator", ".")
        if attribute and tokens[index + 2][0] == "name" and (index == 0 or tokens[index - 1] != ("operator", ".")):
            read.setdefault(value, set()).add(tokens[index + 2][1])
    return sorted("%s.%s" % (name, answer) for name, answers in read.items() if joins and len(answers) > 1 for answer in sorted(answers))


def answers_recomputed(expression, results=ANSWERING):
    found = [instead for pattern, instead in ANSWERED if pattern.search(expression)]
    joined = joined_answers(expression, results)
    if joined:
        found.append("one boolean the action returns for %s (decided by one named function), not their join" % " and ".join(joined))
    return found


def test_the_recomputed_answers_are_seen():
    assert answers_recomputed("gpu_reclaim_outcome.status in ['failed', 'refused', 'partly fixed']") != []
    assert answers_recomputed("gpu_remediate_breaker_max_percent | int > 0 or gpu_remediate_breaker_max_count | int > 0") != []
    assert answers_recomputed("__gpu_remediate_breaker.refusal | default('') | length > 0") != []
    assert answers_recomputed("gpu_reclaim_host_fails | bool") == []
    assert answers_recomputed("gpu_remediate_guard_refusal | length > 0") != []
    walk = "__gpu_reclaim_walk"
    assert walk in ANSWERING  # gpu_ladder's registered result
    assert answers_recomputed("%s.pending in ['drain', 'reboot'] or %s.drain_followup in ['resume', 'release', 'hold']" % (walk, walk)) != []
    assert answers_recomputed("%s.pending == 'drain' and not %s.drain_followup" % (walk, walk)) != []
    assert answers_recomputed("%s.needs_controller_step" % walk) == [] and answers_recomputed("%s.pending == 'drain'" % walk) == []
    assert answers_recomputed("%s.pending == 'drain' or x.pending" % walk) == []
    # a command's rc and output are the node's words, not an answer of the collection's Python
    assert answers_recomputed("__shell.rc != 0 or __shell.stdout | trim != version") == []
    assert answers_recomputed("gpu_remediate_fleet_refusal | gpuops.remediation.guard_refuses(__gpu_remediate_breaker | default(none))") == []
    assert answers_recomputed("gpu_remediate_breaker_max_percent | gpuops.remediation.breaker_on(gpu_remediate_breaker_max_count)") == []


@pytest.mark.parametrize("path", yaml_files())
def test_no_condition_recomputes_an_answer_python_gives(path):
    with open(os.path.join(ROOT, path)) as handle:
        document = yaml.safe_load(handle)
    found = ["%s: %s: read %s" % (key, " ".join(text.split()), ", ".join(instead))
             for key, text in expressions(document) if key in CONDITION_KEYS
             for instead in [answers_recomputed(text)] if instead]
    assert found == [], "%s works out again what Python answers:\n%s" % (path, "\n".join(found))
