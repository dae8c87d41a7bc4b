# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""PowerShell read by a real PowerShell grammar (tree-sitter-powershell with tree-sitter), for the tests of the
scripts the Windows plugins send: syntax errors, the param block, where each variable is used, what is called."""

from __future__ import annotations

import tree_sitter
import tree_sitter_powershell

PARSER = tree_sitter.Parser(tree_sitter.Language(tree_sitter_powershell.language()))

# Commands that run text as code, or code somewhere else.
DYNAMIC_COMMANDS = frozenset(("invoke-expression", "iex", "invoke-command", "icm", "start-process", "saps", "new-module", "nmo",
                              "start-job", "sajb", "invoke-item", "ii"))


class Script:
    """One script's syntax tree."""

    def __init__(self, text):
        self.text = text
        self.source = text.encode("utf-8")
        self.tree = PARSER.parse(self.source)

    def nodes(self, node=None):
        stack = [node or self.tree.root_node]
        while stack:
            current = stack.pop()
            yield current
            stack.extend(reversed(current.children))

    def text_of(self, node):
        return self.source[node.start_byte:node.end_byte].decode("utf-8")

    def errors(self):
        """[(kind, line, text)] of every ERROR node and every node the parser had to invent (MISSING)."""
        return [("ERROR" if node.type == "ERROR" else "MISSING %s" % node.type, node.start_point[0] + 1, self.text_of(node)[:80])
                for node in self.nodes() if node.type == "ERROR" or node.is_missing]

    def parameters(self):
        """The names (lower case, without $) the script's own param block declares (not a function's)."""
        blocks = [node for node in self.tree.root_node.children if node.type == "param_block"]
        return [self.text_of(child)[1:].lower() for block in blocks for node in self.nodes(block)
                if node.type == "script_parameter" for child in node.children if child.type == "variable"]

    def variables(self, name):
        """Every use of $name outside the param block (variable nodes), each with its ancestors' types."""
        uses = []
        for node in self.nodes():
            if node.type == "variable" and self.text_of(node)[1:].lower() == name.lower():
                chain, parent = [], node.parent
                while parent is not None:
                    chain.append(parent.type)
                    parent = parent.parent
                if "param_block" not in chain:
                    uses.append(chain)
        return uses

    def mentions(self, name):
        """How often the name appears in the text as $name, in any form (inside strings too)."""
        return self.text.lower().count("$" + name.lower())

    def command_names(self):
        return [self.text_of(node).lower() for node in self.nodes() if node.type == "command_name"]

    def invocation_operators(self):
        """Each `&` or `.` command invocation, with what it calls."""
        return [self.text_of(node.parent) for node in self.nodes() if node.type == "command_invokation_operator"]

    def static_calls(self):
        """Each [type]::Member(...) call, as 'type::member' in lower case."""
        calls = []
        for node in self.nodes():
            if node.type == "invokation_expression":
                kinds = [child.type for child in node.children]
                if "::" in kinds and "type_literal" in kinds and "member_name" in kinds:
                    type_name = self.text_of(node.children[kinds.index("type_literal")]).strip("[]").lower()
                    member = self.text_of(node.children[kinds.index("member_name")]).lower()
                    calls.append("%s::%s" % (type_name, member))
        return calls

    def expandable_strings(self):
        return [node for node in self.nodes() if node.type in ("expandable_string_literal", "expandable_here_string_literal")]

    def command_arguments(self, command, parameter):
        """The node after `-parameter` in each call of `command`."""
        found = []
        for node in self.nodes():
            if node.type != "command":
                continue
            names = [child for child in node.children if child.type == "command_name"]
            if not names or self.text_of(names[0]).lower() != command.lower():
                continue
            elements = [child for child in node.children if child.type == "command_elements"]
            items = [item for item in (elements[0].children if elements else []) if item.type != "command_argument_sep"]
            for at, item in enumerate(items):
                if item.type == "command_parameter" and self.text_of(item).lower() == "-" + parameter.lower() and at + 1 < len(items):
                    found.append(items[at + 1])
        return found
