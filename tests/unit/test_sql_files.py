"""The core's `.sql` files: each statement is named, described and literal, and the loader says what is wrong."""

from __future__ import annotations

import pytest

from skiplock.core.sql import SqlFileError, all_files, parse, queries


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


def test_a_statement_reads_as_written() -> None:
    text = "-- header\n\n-- name: one\n-- Says one.\nSELECT 1\n  AS one\n\n-- name: two\n-- Says two.\nSELECT 2\n"
    loaded = parse(text, "t.sql")
    assert loaded.one == "SELECT 1\n  AS one\n"
    assert loaded.two == "SELECT 2\n"
    assert loaded.descriptions == {"one": "Says one.", "two": "Says two."}


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


def test_a_statement_runs_as_written(conn) -> None:
    assert conn.execute(queries("examples").server_time).fetchone() is not None
