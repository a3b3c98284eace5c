"""Every ```python block of README.md and docs/ runs against a real, freshly migrated PostgreSQL.

One test per page: its blocks run in order in one module namespace, with DATABASE_URL pointing at a
private copy of the migrated template database (`fresh_db_url`), the current folder a temporary one,
and skiplock's process-wide registries (handlers, recurring definitions, error hooks) empty at the
start and restored afterwards, so pages cannot see each other's queues. An example that no longer
runs fails here with the page and line of its block.
"""

from __future__ import annotations

import asyncio
import copy
import importlib
import os
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.docs.examples import REPO, blocks, pages

RUNNABLE = [p for p in pages() if any(b.runs or b.file for b in blocks(p))]


def _as_url(conninfo: str) -> str:
    """A libpq key=value string as a postgresql:// URL (what users export, and what SQLAlchemy parses)."""
    from urllib.parse import quote

    from psycopg.conninfo import conninfo_to_dict

    params = {k: str(v) for k, v in conninfo_to_dict(conninfo).items()}
    auth = quote(params.pop("user", "postgres"), safe="")
    if "password" in params:
        auth += ":" + quote(params.pop("password"), safe="")
    host = params.pop("host", "localhost")
    port = params.pop("port", "5432")
    dbname = params.pop("dbname", "postgres")
    query = "&".join(f"{k}={quote(v, safe='')}" for k, v in params.items())
    return f"postgresql://{auth}@{host}:{port}/{dbname}" + (f"?{query}" if query else "")


@pytest.fixture
def clean_registries() -> Iterator[None]:
    """Empty handler, recurring and hook registries for one page; the previous ones put back after."""
    from skiplock.core.features import hooks  # the registries themselves, not the public re-exports
    from skiplock.core.registry import REGISTRY
    from skiplock.services import recurring_defs

    state: list[Any] = [REGISTRY._tasks, recurring_defs.DEFINITIONS, hooks._ON_FAILURE, hooks._ON_DEAD,
                        hooks._QUEUE_ON_FAILURE, hooks._QUEUE_ON_DEAD]
    saved = [copy.copy(container) for container in state]
    for container in state:
        container.clear()
    yield
    for container, old in zip(state, saved, strict=True):
        container.clear()
        if isinstance(container, list):
            container.extend(old)
        else:
            container.update(old)


@pytest.mark.parametrize("page", RUNNABLE, ids=[str(p.relative_to(REPO)) for p in RUNNABLE])
def test_page_examples_run(page: Path, fresh_db_url: str, clean_registries: None, tmp_path: Path,
                           monkeypatch: pytest.MonkeyPatch) -> None:
    from skiplock.core.producer import close_default_pool
    from skiplock.producer_async import close_default_async_pool

    monkeypatch.setenv("DATABASE_URL", _as_url(fresh_db_url))  # the form users have; SQLAlchemy needs it
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))  # a page may write a module and import it
    name = "docs_example_" + "".join(c if c.isalnum() else "_" for c in str(page.relative_to(REPO)))
    module = types.ModuleType(name)
    module.__file__ = str(page)
    sys.modules[name] = module  # classes defined by the page are importable by name (typed tasks)
    environ = dict(os.environ)  # a page may set variables (the console's login): they end with the page
    try:
        for block in blocks(page):
            if block.file is not None:  # the reader saves it: so does the test, in the page's folder
                target = tmp_path / block.file
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(block.source)
                importlib.invalidate_caches()
                continue
            if not block.runs:
                continue
            # the block's own line numbers in tracebacks: pad so line N of the code is line N of the page
            code = compile("\n" * block.line + block.source, str(page), "exec")
            exec(code, module.__dict__)
    finally:
        os.environ.clear()
        os.environ.update(environ)
        sys.modules.pop(name, None)
        for loaded in [m for m, mod in sys.modules.items()  # the page's own files: not for the next page
                       if str(getattr(mod, "__file__", None) or "").startswith(str(tmp_path))]:
            del sys.modules[loaded]
        close_default_pool()
        asyncio.run(close_default_async_pool())


def test_every_skip_gives_a_reason_and_every_python_block_is_accounted_for() -> None:
    """A skip marker is honest (it says why); a python block is either run or skipped on purpose."""
    for page in pages():
        for block in blocks(page):
            if block.skip_reason is not None:
                assert len(block.skip_reason.strip()) >= 5, f"{block.page}:{block.line}: skip without a reason"
            if block.language in ("python", "py") and block.skip_reason is None:
                compile(block.source, f"{block.page}:{block.line}", "exec")  # a runnable block parses


def test_the_collector_sees_the_convention(tmp_path: Path) -> None:
    """The collector itself: run, skipped (with its reason) and other languages are told apart."""
    page = tmp_path / "page.md"
    page.write_text("# t\n\n```python\nx = 1\n```\n\n<!-- skip: needs a server -->\n```python\nserve()\n```\n\n"
                    "```bash\nrm -rf /\n```\n\n- a list\n\n    ```python\n    y = 2\n    ```\n\n"
                    "<!-- file: app/tasks.py -->\n```python\nz = 3\n```\n")
    found = blocks(page)
    assert [(b.language, b.runs, b.skip_reason) for b in found] == [
        ("python", True, None), ("python", False, "needs a server"), ("bash", False, None), ("python", True, None),
        ("python", False, None)]
    assert found[3].source == "y = 2\n"
    assert found[4].file == "app/tasks.py"
