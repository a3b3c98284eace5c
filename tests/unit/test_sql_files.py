"""The core's `.sql` files: each statement is named, described and literal, and the loader says what is wrong."""

from __future__ import annotations

import re

import pytest
from psycopg import _queries  # the parse cache's limit is psycopg's own, not a public name

from skiplock.core.error_summary import GROUP_SQL, HEADLINE_SQL
from skiplock.core.sql import SqlFileError, all_files, parse, queries, squeeze


def test_every_file_parses_and_every_statement_is_described() -> None:
    assert all_files(), "worker/core/sql/ has no .sql file"
    for name in all_files():
        loaded = queries(name)
        assert loaded.names, f"{name}.sql names no statement"
        for statement in loaded.names:
            assert loaded.descriptions[statement], statement
            text = getattr(loaded, statement)
            # literal: nothing left for Python to fill in but bound parameters
            assert "{" not in text.replace("'{", "").replace("'{}'", ""), f"{name}.{statement} looks like a template"


def test_every_statement_fits_psycopgs_parse_cache() -> None:
    # psycopg re-parses the placeholders of a longer text on every execute: a claim grown past the limit
    # would cost the worker's claim loop CPU per claim. It fails here, not in a benchmark.
    for name in all_files():
        loaded = queries(name)
        for statement in loaded.names:
            text = getattr(loaded, statement)
            assert len(text) <= _queries.MAX_CACHED_STATEMENT_LENGTH, (name, statement, len(text))
            assert "--" not in text.replace("'--'", "") and "\n" not in text, (name, statement)


def test_the_finished_filter_is_one_text_in_every_statement() -> None:
    # the console's "all matching" list, count, retry and purge must cover the same jobs
    matching = queries("jobs_matching")
    clause = squeeze("""status = %(status)s::job_status
       AND (%(queue)s::text IS NULL OR queue = %(queue)s::text)
       AND (%(since)s::timestamptz IS NULL OR finished_at >= %(since)s::timestamptz)
       AND (%(until)s::timestamptz IS NULL OR finished_at <= %(until)s::timestamptz)
       AND (%(error)s::text IS NULL OR """ + GROUP_SQL + """ = %(error)s::text)
       AND (%(text)s::text IS NULL OR unique_key ILIKE %(text)s::text OR payload::text ILIKE %(text)s::text
            OR last_error ILIKE %(text)s::text)""")
    assert len(matching.names) >= 4
    for statement in matching.names:
        assert clause in getattr(matching, statement), statement
    assert squeeze(HEADLINE_SQL) in matching.list_finished_matching_page


def test_a_statement_reads_as_written_and_is_sent_squeezed() -> None:
    text = "-- header\n\n-- name: one\n-- Says one.\nSELECT 1\n  AS one\n\n-- name: two\n-- Says two.\nSELECT 2\n"
    loaded = parse(text, "t.sql")
    assert loaded.one == "SELECT 1 AS one"
    assert loaded.two == "SELECT 2"
    assert loaded.descriptions == {"one": "Says one.", "two": "Says two."}


def test_squeeze_keeps_the_statement_and_its_literals() -> None:
    statement = """
    SELECT a.id, ( 1 + 2 ) AS three  -- a comment, with an apostrophe's
      FROM t a
     WHERE a.x <= %(x)s AND a.s = 'queued'   -- another
    """
    assert squeeze(statement) == "SELECT a.id,(1 + 2)AS three FROM t a WHERE a.x<=%(x)s AND a.s='queued'"
    assert squeeze("SELECT 'a, b' -- squeezed, the string keeps its space") == "SELECT 'a, b'"
    assert squeeze("SELECT 'a--b',  E'\\n'  ,'it''s  (x)'") == "SELECT 'a--b',E'\\n','it''s  (x)'"
    assert squeeze('SELECT "odd  name" FROM t') == 'SELECT "odd  name" FROM t'


def test_a_missing_name_lists_the_names_there_are() -> None:
    loaded = parse("-- name: one\n-- Says one.\nSELECT 1\n", "t.sql")
    with pytest.raises(AttributeError, match=r"t.sql has no statement named 'tow'; it has: one"):
        _ = loaded.tow


@pytest.mark.parametrize(("text", "message"), [
    ("-- name: a\nSELECT 1\n", "has no '-- ' line"),
    ("-- name: a\n-- Says a.\n", "has no text"),
    ("-- name: a\n-- A.\nSELECT 1\n-- name: a\n-- A.\nSELECT 2\n", "named twice"),
])
def test_a_malformed_file_is_refused_with_the_reason(text: str, message: str) -> None:
    with pytest.raises(SqlFileError, match=message):
        parse(text, "t.sql")


def test_no_python_module_assembles_core_sql() -> None:
    # the statements live in the .sql files; nothing of the core formats them any more
    from pathlib import Path
    core = Path(__file__).resolve().parents[2] / "worker" / "core"
    assert not (core / "statements.py").exists()
    for path in core.rglob("*.py"):
        assert not re.search(r"queries\([^)]*\)\.\w+\s*\.(replace|format)\(", path.read_text()), path


def test_a_statement_runs_as_written(conn) -> None:
    assert conn.execute(queries("jobs_claim").limits_of, {"queues": ["nothing"]}).fetchall() == []
