# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A name from a node is text, never structure: each format's helper, checked with a real CommonMark (+ GFM tables)
renderer and Python's own HTML parser, not by looking for the characters the helper changes."""

from __future__ import annotations

import html.parser

import pytest
from markdown_it import MarkdownIt  # markdown-it-py: CommonMark, the parser rich (ansible-lint's) is built on

from ansible_collections.gpuops.remediation.plugins.module_utils._escape import html_text, markdown, markdown_code, printable

HOSTILE = [
    "\n## j: fixed with TERM",
    "<svg/onload=x>",
    "<img src=x onerror=alert(1)>",
    "[click](http://evil.example/)",
    "![img](http://evil.example/x.png)",
    "<http://evil.example/>",
    "a | b | c",
    "`code` **bold** _em_ ~~gone~~",
    "# heading",
    "> quote",
    "1. item",
    "- item",
    "    indented code",
    "\\|\\",
    "x\x1b[31mred\x1b[0m\r\x00y",
    "exe\u202etxt.sh",
    "a\u2028b\u2029c\u200bd",
    "&lt;entity&gt;",
    "<!-- comment -->",
    "```\nfence",
    "name\r\n\r\n<script>alert(1)</script>",
]

RENDER = MarkdownIt("commonmark").enable("table").enable("strikethrough")


class _Tags(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags, self.text = [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)

    def handle_data(self, data):
        self.text.append(data)


def _parse(page):
    parser = _Tags()
    parser.feed(page)
    parser.close()
    return parser.tags, "".join(parser.text)


@pytest.mark.parametrize("name", HOSTILE)
def test_printable_keeps_every_character_visible_on_one_line(name):
    text = printable(name)
    assert "\n" not in text and "\r" not in text and "\x1b" not in text and "\x00" not in text
    assert not any(char in text for char in "\u202e\u2028\u2029\u200b")
    assert printable(text) == text  # shown once: escaping what is already shown changes nothing


def test_printable_shows_controls_as_escapes():
    assert printable("a\x1b[0mb") == "a\\x1b[0mb"
    assert printable("r\rn\nz\x00") == "r\\x0dn\\x0az\\x00"
    assert printable("exe\u202etxt") == "exe\\u202etxt"
    # every invisible character by its category: soft hyphen, a tag character, an undecodable byte (surrogateescape)
    assert printable("a\u00adb\U000e0041c\udcffd") == "a\\xadb\\U000e0041c\\udcffd"
    assert printable(None) == "" and printable(42) == "42"
    assert printable("pt_main_thread étude") == "pt_main_thread étude"  # ordinary text is untouched


@pytest.mark.parametrize("name", HOSTILE)
@pytest.mark.parametrize("line", ["- %s", "| 1 | %s | x |", "## node01: %s", "%s"])
def test_markdown_renders_a_name_as_the_text_it_was(name, line):
    """Wherever a writer puts it on a line (a list item, a table cell, a heading, a paragraph), a name renders as one
    text node holding exactly the name as printable shows it: no heading, link, image, tag, emphasis or extra cell."""
    table = line.startswith("|")
    source = ("| pid | name | x |\n|---|---|---|\n" if table else "") + line % markdown(name) + "\n"
    tags, text = _parse(RENDER.render(source))
    table_tags = ["table", "thead", "tr", "th", "th", "th", "tbody", "tr", "td", "td", "td"]
    expected = {"- %s": ["ul", "li"], "## node01: %s": ["h2"], "%s": ["p"]}.get(line, table_tags)
    assert tags == expected, (name, source)
    assert printable(name) in text.replace("\n", "")


def test_markdown_keeps_ordinary_names_readable():
    assert markdown("pt_main_thread") == "pt_main_thread"
    assert markdown("python3 train.py --lr 3.2") == "python3 train.py --lr 3.2"
    assert markdown("stuck -> idle") == "stuck -> idle"


@pytest.mark.parametrize("name", HOSTILE + ["``a`b``", "`"])
def test_markdown_code_is_one_code_span_of_the_name(name):
    tags, text = _parse(RENDER.render("# report %s\n" % markdown_code(name)))
    assert tags == ["h1", "code"]
    assert text.rstrip("\n") == "report " + printable(name)


@pytest.mark.parametrize("name", HOSTILE + ['" onmouseover="x', "' onfocus='y"])
def test_html_text_is_text_and_a_quoted_attribute_stays_one(name):
    page = '<p data-name="%s" title=\'%s\'>%s</p>' % (html_text(name), html_text(name), html_text(name))
    parser = _Tags()
    attrs = []
    parser.handle_starttag = lambda tag, found: (parser.tags.append(tag), attrs.append(found))
    parser.feed(page)
    parser.close()
    assert parser.tags == ["p"]
    assert attrs == [[("data-name", printable(name)), ("title", printable(name))]]
    assert "".join(parser.text) == printable(name)
