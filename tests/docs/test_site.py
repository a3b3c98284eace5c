"""The documentation site builds cleanly and its reference covers the code it describes.

- `mkdocs build --strict` succeeds: a broken link, a missing page of the nav or a missing
  mkdocstrings reference fails here;
- the generated pages (docs/hooks.py) cover every command, option and setting;
- the hand-written reference pages name every table and enum of a migrated database, every metric,
  every public name and every parameter of `enqueue`;
- no page keeps a dated diary (times of day in UTC belong to tests/benchmarks/results/HISTORY.md).
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import inspect
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import psycopg
import pytest

from tests.docs.examples import REPO, pages

DOCS = REPO / "docs"


def _hooks() -> ModuleType:
    spec = importlib.util.spec_from_file_location("skiplock_docs_hooks", DOCS / "hooks.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _all_docs_text() -> str:
    return "\n".join(p.read_text() for p in DOCS.rglob("*.md"))


@pytest.mark.timeout(600)
def test_mkdocs_build_strict_succeeds(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                            cwd=REPO, capture_output=True, text=True, timeout=540)
    assert result.returncode == 0, result.stdout + result.stderr
    built = tmp_path / "site"
    # the generated pages were filled in, not left as markers
    for page in ("reference/cli/index.html", "reference/settings/index.html", "reference/schema/index.html"):
        html = (built / page).read_text()
        assert "<!-- generated:" not in html, page
    assert "SKIPLOCK_BATCH_SIZE" in (built / "reference/settings/index.html").read_text()
    assert (built / "benchmarks/results/curve.png").exists()  # charts published from tests/benchmarks/results


def _walk(parser: argparse.ArgumentParser, prefix: str) -> list[tuple[str, argparse.ArgumentParser]]:
    found = [(prefix, parser)]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found += _walk(sub, f"{prefix} {name}")
    return found


def test_cli_reference_names_every_command_and_option() -> None:
    from skiplock.tools.cli import build_parser

    text = _hooks().cli_reference()
    commands = _walk(build_parser(), "skiplock")[1:]
    assert len(commands) >= 9
    for title, parser in commands:
        assert f"`{title}`" in text, title
        for action in parser._actions:
            for option in action.option_strings:
                if option not in ("-h", "--help"):
                    assert f"`{option}`" in text, f"{title} {option}"


def test_settings_reference_names_every_variable() -> None:
    from skiplock.core.plumbing import config

    rows = _hooks().settings_rows()
    variables = {row[0] for row in rows}
    assert variables == set(config._PARSERS) | {"DATABASE_URL"}
    for variable, default, accepted, meaning in rows:
        assert default and accepted and meaning, variable
    # variables read by the console and the dev command are not Settings fields: each is on some page
    text = _all_docs_text()
    missing = sorted(name for name in config._KNOWN_ELSEWHERE if name not in text)
    assert not missing, f"not documented in docs/: {missing}"


def test_schema_reference_names_every_table_and_enum(template_url: str) -> None:
    text = (DOCS / "reference" / "schema.md").read_text()
    with psycopg.connect(template_url) as conn:
        tables = [r[0] for r in conn.execute(
            "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p', 'u') AND NOT c.relispartition "
            "AND c.relname <> 'test_effects'")]
        enums = [r[0] for r in conn.execute(
            "SELECT t.typname FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace "
            "WHERE n.nspname = 'public' AND t.typtype = 'e'")]
        columns = [r[0] for r in conn.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_schema = 'public' AND table_name = 'jobs'")]
    assert "jobs" in tables and "payload" in columns
    missing = [t for t in tables + enums if f"`{t}`" not in text]
    missing += [f"jobs.{c}" for c in columns if not re.search(rf"^\| `{c}` \|", text, re.MULTILINE)]
    assert not missing, f"docs/reference/schema.md does not name: {missing}"


def test_metrics_reference_names_every_metric() -> None:
    source = (REPO / "worker" / "monitor" / "metrics.py").read_text()
    names = {node.value for node in ast.walk(ast.parse(source))
             if isinstance(node, ast.Constant) and isinstance(node.value, str)
             and re.fullmatch(r"skiplock_[a-z0-9_]+", node.value)}
    assert "skiplock_queue_p99_wait_seconds" in names
    text = (DOCS / "reference" / "metrics.md").read_text()
    assert not sorted(n for n in names if n not in text)
    for outcome in ("completed", "retried", "failed", "dead"):  # built as f"skiplock_jobs_{n}"
        assert f"skiplock_jobs_{outcome}_total" in text


def _public_names() -> dict[str, object]:
    """What docs/reference/api.md declares public: skiplock.__all__ and the named module members."""
    import skiplock
    import skiplock.testing
    import skiplock.webapp
    from skiplock import hooks, producer_async, recurring_defs

    names: dict[str, object] = {f"skiplock.{n}": getattr(skiplock, n) for n in skiplock.__all__ if n != "__version__"}
    names.update({
        "skiplock.producer_async.close_default_async_pool": producer_async.close_default_async_pool,
        "skiplock.hooks.FailedRun": hooks.FailedRun,
        "skiplock.webapp.create_app": skiplock.webapp.create_app,
        "skiplock.webapp.mount": skiplock.webapp.mount,
        **{f"skiplock.recurring_defs.{n}": getattr(recurring_defs, n)
           for n in ("list_schedules", "pause_schedule", "resume_schedule", "run_schedule_now")},
        **{f"skiplock.testing.{n}": getattr(skiplock.testing, n)
           for n in ("drain", "DrainedJob", "enqueued_jobs", "assert_enqueued")},
    })
    return names


def _own_doc(obj: object) -> str | None:
    doc = obj.__doc__ if not isinstance(obj, property) else (obj.fget.__doc__ if obj.fget else None)
    name = getattr(obj, "__name__", "")
    if doc and name and doc.startswith(f"{name}("):  # what @dataclass writes when there is no docstring
        return None
    return doc


def test_public_api_is_documented() -> None:
    api = (DOCS / "reference" / "api.md").read_text()
    for name, obj in _public_names().items():
        assert _own_doc(obj), f"{name} has no docstring"
        assert f"::: {name}" in api or f"{name}" in api, f"docs/reference/api.md does not show {name}"
        if inspect.isclass(obj):  # and the public methods and properties of a public class
            for member, value in vars(obj).items():
                if not member.startswith("_") and (inspect.isfunction(value) or isinstance(value, property)):
                    assert _own_doc(value), f"{name}.{member} has no docstring"


def test_enqueue_reference_lists_every_parameter() -> None:
    from skiplock import enqueue

    text = (DOCS / "reference" / "enqueue.md").read_text()
    for name in inspect.signature(enqueue).parameters:
        assert re.search(rf"^\| `{name}` \|", text, re.MULTILINE), f"enqueue parameter {name} not in the table"


DIARY = re.compile(r"\b\d{1,2}:\d{2}(-\d{1,2}:\d{2})? UTC\b")


def test_no_page_keeps_a_dated_diary() -> None:
    for page in pages():
        for number, line in enumerate(page.read_text().splitlines(), 1):
            assert not DIARY.search(line), (f"{page.relative_to(REPO)}:{number} has a time of day: the history of "
                                            "runs goes to tests/benchmarks/results/HISTORY.md")


def test_every_repository_file_the_docs_name_exists() -> None:
    """A test file, an example or a source file named in the docs is there (the suite was re-laid out once)."""
    pattern = re.compile(r"\b((?:tests|examples|worker|webapp|migrations)/[\w./-]+\.(?:py|sql|md))\b")
    missing = sorted({f"{page.relative_to(REPO)}: {path}" for page in pages()
                      for path in pattern.findall(page.read_text()) if not (REPO / path).exists()})
    assert not missing, missing
