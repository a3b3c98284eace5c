"""The code blocks of README.md and docs/: found, classified and run the way the docs promise.

The convention (docs/reference/writing-the-docs.md):
- a ```python block runs; the blocks of one page run in order, in one namespace (a module of its
  own, so dataclasses and pydantic models defined there are importable by name);
- a block whose previous non-blank line is `<!-- skip: reason -->` does not run (the reason is
  required: a fragment, a server that would never return, a framework the page only shows);
- a block whose previous non-blank line is `<!-- file: PATH -->` is a file the reader creates: it is
  written to PATH (relative to the page's own empty folder, the current directory while it runs) in
  its turn, and later blocks import it or start processes that do (the tutorials start from an empty
  folder this way);
- a ```bash, ```sh, ```shell or ```console block runs in bash (tests/docs/test_shell_blocks.py), unless
  its previous non-blank line is `<!-- illustrative: reason -->` (the reason is required: CI itself, a
  ten-minute soak, a placeholder job id);
- ```text, ```toml, ```ini, ```sql and other languages are not run.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent
SKIP = re.compile(r"^<!-- skip: (.+?) -->$")
ILLUSTRATIVE = re.compile(r"^<!-- illustrative: (.+?) -->$")
SHELL = ("bash", "sh", "shell", "console")
FILE = re.compile(r"^<!-- file: ([\w./-]+) -->$")
FENCE = re.compile(r"^(\s*)(```+|~~~+)\s*([\w+-]*)")


@dataclass(frozen=True)
class Block:
    page: str  # the page's path relative to the repository
    line: int  # the line of the opening fence (1-based)
    language: str
    source: str
    skip_reason: str | None  # why it is not run, when the page says so
    file: str | None = None  # the path the reader saves it as, for a file block
    illustrative: str | None = None  # why a shell block is not run, when the page says so

    @property
    def runs(self) -> bool:
        return self.language in ("python", "py") and self.skip_reason is None and self.file is None

    @property
    def shell_runs(self) -> bool:
        """A shell block that tests/docs/test_shell_blocks.py runs (not marked illustrative)."""
        return self.language in SHELL and self.illustrative is None


def pages() -> list[Path]:
    """README.md and every Markdown page of the docs site."""
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def _name(path: Path) -> str:
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)


def blocks(path: Path) -> list[Block]:
    """Every fenced code block of `path`, in order."""
    lines = path.read_text().splitlines()
    found: list[Block] = []
    i = 0
    previous = ""  # the last non-blank line outside a block
    while i < len(lines):
        match = FENCE.match(lines[i])
        if not match:
            if lines[i].strip():
                previous = lines[i].strip()
            i += 1
            continue
        indent, fence, language = match.groups()
        start = i
        body: list[str] = []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(fence):
            body.append(lines[i][len(indent):] if lines[i].startswith(indent) else lines[i])
            i += 1
        skip = SKIP.match(previous)
        file = FILE.match(previous)
        shown = ILLUSTRATIVE.match(previous)
        found.append(Block(_name(path), start + 1, language.lower(), textwrap.dedent("\n".join(body)) + "\n",
                           skip.group(1) if skip else None, file.group(1) if file else None,
                           shown.group(1) if shown else None))
        previous = ""
        i += 1
    return found
