"""Write the table of `-o` options into docs/usage.md, from the code that parses them
(zarrfs/cli/help.py), so the docs and `zarrfs --help` cannot disagree; tests/cli/test_docs_options.py
fails when the table in the docs is not this one.

    .venv/bin/python scripts/options_table.py          # rewrite the table in docs/usage.md
"""

import re
import sys
from pathlib import Path

from zarrfs.cli.help import options_table
from zarrfs.fs.filesystem import Options
from zarrfs.views import ALL_VIEWS

USAGE = Path(__file__).resolve().parent.parent / "docs" / "usage.md"
BEGIN = "<!-- options table: written by scripts/options_table.py from zarrfs/cli/help.py; do not edit -->"
END = "<!-- end of options table -->"
BETWEEN = re.compile(re.escape(BEGIN) + r"\n(.*?)" + re.escape(END), re.S)


def table() -> str:
    return options_table(Options(), ALL_VIEWS)


def table_in_docs(text: str) -> str | None:
    found = BETWEEN.search(text)
    return found.group(1).rstrip("\n") if found else None


def main() -> int:
    text = USAGE.read_text()
    if table_in_docs(text) is None:
        print(f"{USAGE}: no {BEGIN!r} ... {END!r} section to write the table into", file=sys.stderr)
        return 1
    USAGE.write_text(BETWEEN.sub(lambda _: f"{BEGIN}\n{table()}\n{END}", text))
    return 0


if __name__ == "__main__":
    sys.exit(main())
