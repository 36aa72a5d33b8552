"""The docs say what the code does about options: the table in docs/usage.md is the one the code
writes (scripts/options_table.py), `--help` lists every option the parser takes, and the defaults
and numbers the prose of docs/*.md states about options are the code's."""

import re
import sys
from pathlib import Path

import pytest

from zarrfs.cli.command import OPTION_NAMES
from zarrfs.cli.help import option_lines
from zarrfs.engine.write_bound import EARLY_WRITE_BACK
from zarrfs.fs.filesystem import REMOTE_FETCHERS, Options
from zarrfs.views import ALL_VIEWS

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
import options_table  # noqa: E402  (scripts/ is no package)

DOCS = sorted(p for p in (ROOT / "docs").glob("*.md") if p.name != "bench-history.md")  # history states old numbers

# Facts the prose states about options, and the code's value of each
FACTS = [
    (re.compile(r"(\d+)\s+fetched at once"), REMOTE_FETCHERS),
    (re.compile(r"when (\d+) MiB \(or a quarter of `dirty_size`"), EARLY_WRITE_BACK >> 20),
]


def defaults() -> dict[str, str]:
    return {syntax.partition("=")[0]: default for syntax, default, _ in option_lines(Options(), ALL_VIEWS)}


def test_the_table_in_the_docs_is_the_one_the_code_writes():
    in_docs = options_table.table_in_docs(options_table.USAGE.read_text())
    assert in_docs == options_table.table(), "run .venv/bin/python scripts/options_table.py"


def test_help_lists_every_option_the_parser_takes():
    listed = {name.strip().partition("=")[0] for syntax, _, _ in option_lines(Options(), ALL_VIEWS)
              for name in syntax.split(",")}
    assert set(OPTION_NAMES) <= listed, set(OPTION_NAMES) - listed


@pytest.mark.parametrize("page", DOCS, ids=lambda p: p.name)
def test_defaults_in_brackets_are_the_codes(page):
    """`name=VALUE` [default] and `-o name=VALUE` (default `X`), as the prose writes them."""
    known = defaults()
    stated = re.findall(r"`(?:-o )?(\w+)=[A-Z]+` \[`?([^\]`]+)`?\]", page.read_text())
    stated += re.findall(r"`-o (\w+)=[A-Z]+`[^`(]{0,20}\(default `([^`]+)`", page.read_text())
    for name, default in stated:
        if name in known and re.fullmatch(r"[\d.]+[KMGT]?", known[name]):  # numbers and sizes, not rules
            assert default == known[name], f"{page.name}: {name} default {default!r}, the code's is {known[name]!r}"


@pytest.mark.parametrize("page", DOCS, ids=lambda p: p.name)
def test_numbers_stated_about_options_are_the_codes(page):
    text = page.read_text()
    for pattern, value in FACTS:
        for found in pattern.finditer(text):
            assert int(found.group(1)) == value, f"{page.name}: {found.group(0)!r}, the code says {value}"


def test_the_checks_see_the_defaults_the_docs_state():
    """The patterns above find what the docs say (a check that matches nothing checks nothing)."""
    text = "\n".join(p.read_text() for p in DOCS)
    assert len(re.findall(r"`(?:-o )?(\w+)=[A-Z]+` \[`?([^\]`]+)`?\]", text)) >= 3
    for pattern, _ in FACTS:
        assert pattern.search(text), pattern.pattern
