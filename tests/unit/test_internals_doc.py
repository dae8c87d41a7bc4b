# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""docs/internals.md names every private file of the collection, and only files that exist; its per-file part is what
tools/gen_internals.py writes from the docstrings; the functions docs/internals.md, safety.md and ladder.md name exist;
safety.md's refusal rules are _protect.refusal's, in its order."""

import ast
import glob
import importlib.util
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PRIVATE = sorted(os.path.basename(path) for pattern in ("plugins/module_utils/**/_*.py", "plugins/plugin_utils/**/_*.py")
                 for path in glob.glob(os.path.join(ROOT, pattern), recursive=True) if not path.endswith("__init__.py"))


def internals():
    with open(os.path.join(ROOT, "docs", "internals.md")) as handle:
        return handle.read()


def test_every_private_file_is_named():
    text = internals()
    assert [name for name in PRIVATE if "`%s`" % name not in text and "%s`" % name not in text] == []


def test_every_file_named_exists():
    named = set(os.path.basename(name) for name in re.findall(r"`(?:[\w/]*/)?(_[a-z0-9_]+\.py)`", internals()))
    assert sorted(named - set(PRIVATE)) == []


# ---------------------------------------------------------------- generated from the docstrings

def _gen_internals():
    spec = importlib.util.spec_from_file_location("gen_internals", os.path.join(ROOT, "tools", "gen_internals.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


PLUGIN_FILES = sorted(os.path.relpath(path, ROOT) for path in glob.glob(os.path.join(ROOT, "plugins", "**", "*.py"), recursive=True))


def test_every_file_under_plugins_has_a_module_docstring():
    assert [path for path in PLUGIN_FILES if not ast.get_docstring(ast.parse(open(os.path.join(ROOT, path)).read()))] == []


def test_the_generated_part_is_what_the_docstrings_say():
    text = internals()
    assert _gen_internals().render(text) == text, "docs/internals.md differs from the docstrings: run python tools/gen_internals.py"


def test_the_generated_part_names_every_file_under_plugins():
    generated = _gen_internals().generated()
    assert [path for path in PLUGIN_FILES if not path.endswith("__init__.py") and "| `%s` |" % path not in generated] == []


# ---------------------------------------------------------------- the functions the docs name exist

DOCS = ("internals.md", "safety.md", "ladder.md")
# A reference in backticks: `module.name` (after an optional folder path, with an optional class between) or `name(...)`.
DOTTED = re.compile(r"^(?:[\w/]*/)?(\w+)\.(\w+)(?:\.(\w+))?(?:\(.*\))?$")
CALLED = re.compile(r"^(\w+)\(")
# Functions of others the docs name: not ours to define.
OTHERS = {"open_files": "psutil's Process.open_files", "default": "Jinja's filter", "prctl": "the system call",
          "func": "run_with_deadline's argument"}
EXTENSIONS = ("py", "yml", "yaml", "md", "json", "jsonl", "lock", "service", "target", "so", "ps1", "txt", "conf", "d", "x")


def _defined():
    """{module name: {top-level name: {member names}}} and the set of every function or class name, over plugins/."""
    modules, anywhere = {}, set()
    for path in PLUGIN_FILES:
        tree = ast.parse(open(os.path.join(ROOT, path)).read())
        names = {}
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names[node.name] = set(child.name for child in node.body if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)))
                names[node.name] |= set(target.id for child in node.body if isinstance(child, ast.Assign)
                                        for target in child.targets if isinstance(target, ast.Name))
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                for target in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                    if isinstance(target, ast.Name):
                        names[target.id] = set()
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                for alias in node.names:
                    names.setdefault(alias.asname or alias.name.split(".")[0], set())
        modules.setdefault(os.path.basename(path)[:-3], {}).update(names)
        anywhere |= set(node.name for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)))
    return modules, anywhere


def _references(name):
    with open(os.path.join(ROOT, "docs", name)) as handle:
        text = handle.read()
    return re.findall(r"`([^`\n]+)`", text)


def test_every_function_the_docs_name_exists():
    modules, anywhere = _defined()
    missing = []
    for doc in DOCS:
        for ref in _references(doc):
            dotted = DOTTED.match(ref)
            if dotted and dotted.group(1) in modules and dotted.group(2) not in EXTENSIONS:
                module, name, member = dotted.groups()
                if name not in modules[module] or (member and member not in modules[module][name]):
                    missing.append("%s: `%s`" % (doc, ref))
                continue
            called = CALLED.match(ref)
            if called and called.group(1) not in anywhere and called.group(1) not in OTHERS:
                missing.append("%s: `%s`" % (doc, ref))
    assert missing == [], "named in docs/ but not defined under plugins/"


# ---------------------------------------------------------------- the refusal rules, in the code's order

PROTECT = os.path.join(ROOT, "plugins", "module_utils", "kill", "_protect.py")


def _reason(text):
    """A refusal's fixed words: up to its first ':' or '%', less a placeholder the doc ends them with (`invalid pid N`)."""
    words = re.split(r"[:%]", text, 1)[0].split()
    while len(words) > 1 and re.match(r"^[A-Z]$", words[-1]):
        words.pop()
    return " ".join(words)


def _code_refusals():
    """The reasons _protect.refusal returns, in the order it checks them, the module's helpers it calls inlined where
    they are called (each once)."""
    tree = ast.parse(open(PROTECT).read())
    functions = dict((node.name, node) for node in tree.body if isinstance(node, ast.FunctionDef))
    order, seen = [], set()

    def walk(node):
        if isinstance(node, ast.Return) and node.value is not None:
            literal = node.value.left if isinstance(node.value, ast.BinOp) else node.value
            if isinstance(literal, ast.Constant) and isinstance(literal.value, str) and _reason(literal.value) not in order:
                order.append(_reason(literal.value))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in functions and node.func.id not in seen:
            seen.add(node.func.id)
            for child in node.args:
                walk(child)
            for statement in functions[node.func.id].body:
                walk(statement)
            return
        for child in ast.iter_child_nodes(node):
            walk(child)

    seen.add("refusal")
    for statement in functions["refusal"].body:
        walk(statement)
    return order


def _doc_refusals():
    """The reasons reported, row by row, of docs/safety.md's table "What is never signalled, in the order it is checked"."""
    with open(os.path.join(ROOT, "docs", "safety.md")) as handle:
        section = handle.read().split("## What is never signalled, in the order it is checked", 1)[1].split("\n\n")[1]
    rows = [line.split(" | ") for line in section.splitlines() if re.match(r"^\| \d+ \|", line)]
    return [_reason(reason) for row in rows for reason in re.findall(r"`([^`]+)`", row[-1])]


def test_the_refusal_rules_of_the_doc_are_the_codes_in_its_order():
    code, doc = _code_refusals(), _doc_refusals()
    assert code[:3] == ["pid 1", "invalid pid", "kernel thread"]  # the parse reads refusal()
    kill_code = "".join(open(path).read() for path in glob.glob(os.path.join(ROOT, "plugins", "module_utils", "kill", "*.py")))
    # The protected users and groups are the policy's own answer (_protect_entries), asked where the names are.
    elsewhere = [reason for reason in doc if reason not in code]
    assert [reason for reason in elsewhere if '"%s: ' % reason not in kill_code] == []
    assert [reason for reason in doc if reason in code] == code, "docs/safety.md's table and _protect.refusal disagree"
