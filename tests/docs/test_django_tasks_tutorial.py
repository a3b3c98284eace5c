"""docs/tutorial/django-tasks.md, run as its reader runs it: the whole page in one bash shell, in order.

Each ```bash block runs as written; each `<!-- file: PATH -->` block is saved to PATH (a heredoc) at its
place in the page, in the folder the page's own `cd` reached. The install line installs skiplock's
wheel, built from the checkout, through the variable the page documents: SKIPLOCK. DATABASE_URL
is a database of its own, which the page keeps (its export only sets a default). The page must end
with check.py's "ok" and a worker that stopped with exit 0.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from pathlib import Path

import psycopg
import pytest

from tests.docs.examples import REPO, blocks
from tests.docs.test_examples import _as_url
from tests.integration.test_package import dists  # noqa: F401  (the wheel, built once per run)
from tests.support.pgcluster import with_database

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

PAGE = REPO / "docs" / "tutorial" / "django-tasks.md"
DELIMITER = "SKIPLOCK_TUTORIAL_FILE"


def page_as_script(page: Path) -> str:
    """The page's shell lines and files, in order, as one bash script."""
    parts = ["set -euo pipefail"]
    for block in blocks(page):
        if block.file is not None:
            assert DELIMITER not in block.source
            parts.append(f"mkdir -p \"$(dirname '{block.file}')\"\ncat > '{block.file}' <<'{DELIMITER}'\n"
                         f"{block.source}{DELIMITER}")
        elif block.language == "bash":
            parts.append(block.source)
    return "\n".join(parts) + "\n"


def test_the_script_has_every_shell_block_and_file_of_the_page() -> None:
    found = blocks(PAGE)
    script = page_as_script(PAGE)
    assert [b for b in found if b.language == "bash"], "the page has shell lines"
    for block in found:
        if block.language == "bash" or block.file is not None:
            assert block.source in script, block.line


def test_the_tutorial_runs_as_written(dists: dict[str, Path], tmp_path: Path, pg_admin_url: str) -> None:  # noqa: F811
    name = f"skiplock_tut_djt_{os.getpid()}"
    with psycopg.connect(pg_admin_url, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{name}"')
    env = {k: v for k, v in os.environ.items()  # the reader's shell: nothing of the checkout or the test run
           if not k.startswith(("SKIPLOCK_", "PYTHON", "VIRTUAL_ENV", "DJANGO_", "DATABASE_URL"))}
    env.update(SKIPLOCK=str(dists["checkout"]), DATABASE_URL=_as_url(with_database(pg_admin_url, name)))
    log = tmp_path / "shell.log"
    try:
        # a session of its own: if the page fails midway, its background worker is stopped with it below
        with open(log, "w") as out:
            shell = subprocess.Popen(["bash", "-c", page_as_script(PAGE)], cwd=tmp_path, env=env, stdout=out,
                                     stderr=subprocess.STDOUT, text=True, start_new_session=True)
            try:
                code = shell.wait(timeout=800)
            finally:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(shell.pid, signal.SIGKILL)  # whatever the page left running
    finally:
        with psycopg.connect(pg_admin_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    output = log.read_text()
    assert code == 0, output[-8000:]
    assert "\nok\n" in output, output[-3000:]  # check.py's last line; the worker logs its stop after it
    assert (tmp_path / "tasks-demo" / ".venv").is_dir()  # the page's own venv, from its install line
