"""MkDocs hooks: the reference pages that are generated from the code, so they cannot drift from it.

A page holds a marker line and the build puts the generated Markdown in its place:

- `<!-- generated: cli -->`: every `skiplock` command, from the argparse parser (`build_parser()`);
- `<!-- generated: settings -->`: every environment variable of `Settings`, from its one definition
  in worker/core/plumbing/config.py (field, default, the comment that names the variable and says what it means,
  and what the parser accepts, asked of the parser itself);
- `<!-- generated: states -->` and `<!-- generated: transitions -->`: `JobStatus` and the operator's
  transition table (worker/core/status.py, worker/core/transitions.py);
- `<!-- include: PATH -->`: a file of the repository (the changelog);
- `<!-- file: PATH -->` (the tutorials): shown as the file's name above its block.

The benchmark charts stay in tests/benchmarks/results/ beside their data; `on_files` publishes them as
`benchmarks/results/*.png` so the benchmarks page shows them without a copy.
tests/docs/test_site.py imports this module and checks that the output covers every command,
option and setting.
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import re
import tokenize
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
PACKAGE_MIRROR = REPO / "build" / "docs-src" / "skiplock"
RESULTS = REPO / "tests" / "benchmarks" / "results"
MARKER = re.compile(r"^<!-- (generated|include): ([\w./-]+) -->$", re.MULTILINE)
# `<!-- file: PATH -->` before a code block: the reader saves the block as PATH (tests/docs runs it so);
# the rendered page names the file above the block, since an HTML comment shows nothing
FILE_MARKER = re.compile(r"^<!-- file: ([\w./-]+) -->$", re.MULTILINE)


# ---- the command line -------------------------------------------------------------------------


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _argument_rows(parser: argparse.ArgumentParser) -> list[str]:
    rows = []
    for action in parser._actions:  # argparse has no public walk of a parser's arguments
        if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
            continue
        if action.option_strings:
            name = ", ".join(f"`{s}`" for s in action.option_strings)
            if action.nargs != 0:
                name += f" `{action.metavar or action.dest.upper()}`"
        else:
            name = f"`{action.metavar or action.dest}`" + (" (optional)" if action.nargs == "?" else "")
        details = []
        if action.choices:
            details.append("one of " + ", ".join(f"`{c}`" for c in action.choices))
        if action.default not in (None, False, argparse.SUPPRESS) and action.nargs != 0:
            details.append(f"default `{action.default}`")
        help_text = (action.help or "") % {"default": action.default} if action.help else ""
        rows.append(f"| {name} | {_cell(help_text)} | {_cell('; '.join(details))} |")
    return rows


def _command_section(parser: argparse.ArgumentParser, title: str, level: int) -> list[str]:
    lines = [f"{'#' * level} `{title}`", ""]
    if parser.description:
        lines += [parser.description[0].upper() + parser.description[1:] + ".", ""]
    usage = parser.format_usage().strip().removeprefix("usage: ")
    lines += ["```text", usage, "```", ""]
    rows = _argument_rows(parser)
    if rows:
        lines += ["| argument | meaning | values |", "|---|---|---|", *rows, ""]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                lines += _command_section(sub, f"{title} {name}", min(level + 1, 4))
    return lines


def cli_reference() -> str:
    """Markdown for every `skiplock` command and its arguments, read from the parser."""
    from skiplock.tools.cli import build_parser

    parser = build_parser()
    lines = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in sorted(action.choices.items()):
                lines += _command_section(sub, f"skiplock {name}", 2)
    return "\n".join(lines)


# ---- settings ---------------------------------------------------------------------------------


def _field_comments(cls: type) -> dict[str, str]:
    """field name -> its comment in the class body: on the same line, else the comment lines above it."""
    import inspect

    source = inspect.getsource(cls)
    comments: dict[str, str] = {}
    pending: list[str] = []
    lines = source.splitlines()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            line = lines[tok.start[0] - 1]
            text = tok.string.lstrip("#").strip()
            code = line[: tok.start[1]].strip()
            match = re.match(r"(\w+)\s*:", code)
            if code and match:
                comments[match.group(1)] = text
                pending = []
            elif not code:
                pending.append(text)
        elif tok.type == tokenize.NAME and tok.start[1] == 4 and pending:
            line = lines[tok.start[0] - 1]
            if re.match(r"\s{4}\w+\s*:", line):
                comments[tok.string] = " ".join(pending)
            pending = []
    return comments


# What a field's None default means, in the words a reader of the environment needs.
_UNSET_MEANS = {"database_url": "(required)", "prefetch": "auto", "heartbeat_interval": "lease / 3",
                "direct_url": "`DATABASE_URL`", "health_port": "off"}


def _default_text(f: dataclasses.Field[Any], variable: str) -> str:
    if f.default is dataclasses.MISSING:
        return "none" if f.default_factory is not dataclasses.MISSING else ""
    value = f.default
    if value is None:
        return _UNSET_MEANS.get(f.name, "unset")
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return "all" if f.name == "queues" else "none"
    if variable.endswith("_MS"):
        value = value * 1000  # the field is in seconds, the variable in milliseconds
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return f"`{value}`"


def _accepted(variable: str, parse: Any) -> str:
    """What the parser accepts, in its own words: the message it gives for a value it refuses."""
    from skiplock.core.errors import ConfigError

    try:
        parse(variable, "\x00?")
    except ConfigError as exc:
        match = re.search(r"must (?:be|look like) (.*?), got", str(exc))
        if match:
            return match.group(1)
    return "comma-separated names" if variable in ("SKIPLOCK_TASKS", "SKIPLOCK_QUEUES") else "a string"


def settings_rows() -> list[tuple[str, str, str, str]]:
    """(variable, default, accepted values, meaning) for every setting of `Settings`."""
    from skiplock.core.plumbing import config

    comments = _field_comments(config.Settings)
    by_attr = {attr: (name, parse) for name, (attr, parse) in config._PARSERS.items()}
    rows = []
    for f in dataclasses.fields(config.Settings):
        comment = comments.get(f.name, "")
        if f.name == "database_url":
            variable, parse = "DATABASE_URL", None
        else:
            variable, parse = by_attr[f.name]
        meaning = re.sub(r"^[A-Z_]+( \([^)]*\))?:\s*", "", comment)
        accepted = "a PostgreSQL URL or key=value string" if parse is None else _accepted(variable, parse)
        rows.append((variable, _default_text(f, variable), accepted, meaning))
    return rows


def settings_reference() -> str:
    lines = ["| variable | default | accepted | meaning |", "|---|---|---|---|"]
    for variable, default, accepted, meaning in settings_rows():
        lines.append(f"| `{variable}` | {default} | {_cell(accepted)} | {_cell(meaning)} |")
    return "\n".join(lines)


# ---- states and transitions -------------------------------------------------------------------


def states_reference() -> str:
    from skiplock.core.status import JobStatus

    comments = _member_comments(JobStatus)
    lines = ["| status | meaning, and who moves a job out of it |", "|---|---|"]
    for member in JobStatus:
        lines.append(f"| `{member.value}` | {_cell(comments.get(member.name, ''))} |")
    return "\n".join(lines)


def _member_comments(cls: type) -> dict[str, str]:
    """Enum member -> the comment lines just above it."""
    import inspect

    comments: dict[str, str] = {}
    pending: list[str] = []
    for line in inspect.getsource(cls).splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            pending.append(stripped.lstrip("#").strip())
        elif re.match(r"[A-Z_]+ = ", stripped):
            comments[stripped.split()[0]] = " ".join(pending)
            pending = []
        else:
            pending = []
    return comments


def transitions_reference() -> str:
    from skiplock.core.transitions import TRANSITIONS

    lines = ["| action (console button) | from | to | asks for confirmation |", "|---|---|---|---|"]
    for t in TRANSITIONS:
        sources = ", ".join(f"`{s}`" for s in sorted(t.sources))
        lines.append(f"| {t.label} (`{t.action}`) | {sources} | `{t.result}` | {'yes' if t.destructive else 'no'} |")
    return "\n".join(lines)


GENERATORS = {"cli": cli_reference, "settings": settings_reference, "states": states_reference,
              "transitions": transitions_reference}


def render(markdown: str) -> str:
    """Replace every marker line of a page with what it names."""

    def replace(match: re.Match[str]) -> str:
        kind, name = match.groups()
        if kind == "include":
            return (REPO / name).read_text()
        return GENERATORS[name]()

    return FILE_MARKER.sub(r"`\1`:", MARKER.sub(replace, markdown))


# ---- the package as griffe must see it --------------------------------------------------------


def mirror_package() -> Path:
    """build/docs-src/skiplock: symlinks that lay the source folders out as the import names.

    pyproject.toml maps worker/ to `skiplock` and webapp/ to `skiplock.webapp`; mkdocstrings reads
    source files by import path, so it needs that layout on disk. Rebuilt at every load (cheap).
    """
    import shutil

    if PACKAGE_MIRROR.exists():
        shutil.rmtree(PACKAGE_MIRROR)
    PACKAGE_MIRROR.mkdir(parents=True)
    for entry in (REPO / "worker").iterdir():
        if entry.name != "__pycache__":
            (PACKAGE_MIRROR / entry.name).symlink_to(entry)
    for folder in ("webapp", "templates", "static", "migrations"):
        (PACKAGE_MIRROR / folder).symlink_to(REPO / folder)
    return PACKAGE_MIRROR


# ---- MkDocs events ----------------------------------------------------------------------------


def on_startup(**kwargs: Any) -> None:
    # before the plugins read their configuration (mkdocstrings resolves its paths then); only a build
    # makes the mirror, so tests that import this module for its generators leave it alone
    mirror_package()
    # the generated pages import skiplock itself (its parser, Settings, states): say how to get it,
    # rather than fail later in a page with a bare ModuleNotFoundError
    import importlib.util

    if importlib.util.find_spec("skiplock") is None:
        raise SystemExit("docs/hooks.py: skiplock is not installed in this Python; run "
                         "`pip install -e '.[docs]'` in the checkout, then `mkdocs build --strict`")


def on_page_markdown(markdown: str, **kwargs: Any) -> str:
    return render(markdown)


def on_files(files: Any, config: Any, **kwargs: Any) -> Any:
    from mkdocs.structure.files import File

    for png in sorted(RESULTS.glob("*.png")):
        files.append(File(f"benchmarks/results/{png.name}", src_dir=str(REPO / "tests"),
                          dest_dir=config["site_dir"], use_directory_urls=config["use_directory_urls"]))
    return files
