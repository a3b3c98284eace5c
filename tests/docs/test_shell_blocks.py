"""Every shell block of README.md and docs/ runs, as the reader types it, or says why it is illustrative.

One test per page with shell blocks to run: the page's blocks in order, in bash (`set -e`), in an empty
folder, with the environment and the current folder one block leaves carried to the next (a tutorial's
`cd` and `. .venv/bin/activate` hold for its later blocks). The page's `<!-- file: PATH -->` blocks are
written in their turn, so `honcho start` finds the page's Procfile and a worker the page's task module.
What stands in for the reader's own things (docs/reference/writing-the-docs.md):

- `SKIPLOCK` is skiplock's wheel built from the checkout, which the install lines name; until the
  first release that is how a user installs it too;
- every `postgresql://` URL of a block is a freshly migrated scratch database;
- `myapp` is a package with a task module (`myapp.tasks`, one task) and `create_app()` (the standalone
  console), unless the page writes its own;
- the repository's Procfile is in the folder (`honcho start` in a checkout), unless the page writes one;
- the console's login (SKIPLOCK_WEB_USER/PASSWORD) is set, and PORT is a free port;
- the commands that serve until stopped (`skiplock worker`, `web` and `dev`, gunicorn, uvicorn, honcho)
  run until they say they are ready, then get SIGTERM as a deploy would send it, and must stop cleanly.

Nothing runs from the checkout: the blocks run in a fresh venv with the wheel installed (the tutorials
make their own, as they say). A tutorial's ```python blocks run here too, in its own venv's python (one
interpreter for the page, so later blocks see what earlier ones defined), as the reader runs them there:
no pytest, nothing of the checkout.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.docs.examples import REPO, SHELL, blocks, pages
from tests.docs.test_examples import _as_url
from tests.support.wheel import built_wheel, fresh_venv

# Pages that a test of their own runs end to end, exactly as written, in one shell: the Django task framework
# tutorial (tests/docs/test_django_tasks_tutorial.py starts its worker in the background with `&` and stops it
# with `kill %1`, which this block-by-block runner does not model).
RUN_BY_THEIR_OWN_TEST = {REPO / "docs/tutorial/django-tasks.md"}
RUN = [p for p in pages() if any(b.shell_runs for b in blocks(p)) and p not in RUN_BY_THEIR_OWN_TEST]
URL = re.compile(r"postgresql://[^\s'\",}]+")  # stops at a ${VAR:-default}'s closing brace
BLOCK_SECONDS = 600  # a tutorial's install block resolves its dependencies from the index

# Each long-running command, and the lines (extended regexes) it prints once it is ready.
PREAMBLE = r"""
set -e
_serve() {  # _serve READY... -- COMMAND...: run COMMAND until every READY line shows, then SIGTERM it
    local ready=() log pid
    while [ "$1" != "--" ]; do ready+=("$1"); shift; done; shift
    log=$(mktemp)
    setsid "$@" >"$log" 2>&1 &
    pid=$!
    local deadline=$((SECONDS + 90)) pattern
    for pattern in "${ready[@]}"; do
        until grep -Eq -- "$pattern" "$log"; do
            if ! kill -0 "$pid" 2>/dev/null; then
                cat "$log"; echo "SHELL-BLOCK: exited before it was ready: $*"; return 1
            fi
            if [ "$SECONDS" -ge "$deadline" ]; then
                cat "$log"; echo "SHELL-BLOCK: not ready within 90 s: $*"; kill -TERM -- -"$pid"; return 1
            fi
            sleep 0.2
        done
    done
    kill -TERM -- -"$pid"
    local rc=0
    wait "$pid" || rc=$?
    cat "$log"
    if grep -q "Traceback (most recent call last)" "$log"; then
        echo "SHELL-BLOCK: a traceback: $*"; return 1
    fi
    # 0, or the status of a process ended by the SIGTERM it was sent (128 + 15)
    if [ "$rc" -ne 0 ] && [ "$rc" -ne 143 ]; then echo "SHELL-BLOCK: exit $rc after SIGTERM: $*"; return 1; fi
    echo "SHELL-BLOCK: ready and stopped: $*"
}
skiplock() {
    case "$1" in
        worker) _serve "worker .* starting" -- skiplock "$@" ;;
        web) _serve "console on http" "Running on" -- skiplock "$@" ;;
        dev) _serve "console on http" "Listening at" "worker .* starting" -- skiplock "$@" ;;
        *) command skiplock "$@" ;;
    esac
}
gunicorn() { _serve "Listening at" "Booting worker" -- gunicorn "$@"; }
uvicorn() { _serve "Uvicorn running on" -- uvicorn "$@"; }
honcho() {
    case "$1" in
        start) _serve "Listening at" "worker .* starting" -- honcho "$@" ;;
        *) command honcho "$@" ;;
    esac
}
"""

APP = '''def create_app():
    """The reader's web app: here the standalone console stands in for it."""
    from skiplock.webapp import create_app as console

    return console()
'''

TASKS = '''from skiplock import task


@task("emails")
def send_welcome(payload):
    print("Welcome,", payload["to"])
'''


# One interpreter for a tutorial's python blocks: each line on stdin names a block's file, run in one
# namespace; the answer is one JSON line (null, or the traceback).
DRIVER = r"""
import json, os, sys, traceback
answers = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)  # what the blocks and their child processes print goes to the log, never into the answers
sys.stdout = sys.stderr
namespace = {"__name__": "__main__"}
sys.path.insert(0, "")
for line in sys.stdin:
    request = json.loads(line)
    try:
        source = open(request["path"]).read()
        exec(compile("\n" * request["line"] + source, request["page"], "exec"), namespace)
        answers.write(json.dumps(None) + "\n")
    except BaseException:
        answers.write(json.dumps(traceback.format_exc()) + "\n")
    answers.flush()
"""


class PythonSession:
    """The tutorial's python blocks, run by its venv's interpreter in its folder (started at the first)."""

    def __init__(self, env: dict[str, str], cwd: Path, state: Path) -> None:
        self.state = state
        (state / "driver.py").write_text(DRIVER)
        python = shutil.which("python", path=env["PATH"])
        assert python, "no python on the page's PATH"
        self.log = state / "python.log"
        self.proc = subprocess.Popen([python, "-u", str(state / "driver.py")], cwd=cwd, env=env, text=True,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log.open("w"))

    def run(self, page: str, line: int, source: str) -> str | None:
        path = self.state / f"block_{line}.py"
        path.write_text(source)
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps({"path": str(path), "line": line, "page": page}) + "\n")
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline()
        assert answer, f"{page}:{line}: the interpreter died\n{self.log.read_text()[-4000:]}"
        result: str | None = json.loads(answer)
        return None if result is None else result + "\n--- output\n" + self.log.read_text()[-4000:]

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=60)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def wheel_and_venv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    """The built wheel, and a fresh venv with it (and the dev extra: honcho) for the pages that do not
    make their own."""
    root = tmp_path_factory.mktemp("shell-wheel")
    wheel = built_wheel(tmp_path_factory)
    yield wheel, fresh_venv(root / "venv", f"{wheel}[dev]")
    shutil.rmtree(root, ignore_errors=True)


def _environment(venv: Path, wheel: Path, db_url: str, home: Path) -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if k.startswith("PIP_") or k in ("LANG", "LC_ALL", "TMPDIR")}
    return {**keep, "PATH": f"{venv / 'bin'}:/usr/local/bin:/usr/bin:/bin", "VIRTUAL_ENV": str(venv),
            "HOME": os.environ.get("HOME", str(home)), "DATABASE_URL": db_url, "SKIPLOCK": str(wheel),
            "SKIPLOCK_WEB_USER": "admin", "SKIPLOCK_WEB_PASSWORD": "docs-pw", "PORT": str(free_port()),
            "PYTHONUNBUFFERED": "1"}


def _run_block(source: str, env: dict[str, str], cwd: Path, state: Path) -> subprocess.CompletedProcess[str]:
    """One block in bash; the environment and folder it leaves are written to `state` for the next."""
    script = (PREAMBLE + "\n" + source + "\n"
              f"pwd > {shlex.quote(str(state / 'cwd'))}\nenv -0 > {shlex.quote(str(state / 'env'))}\n")
    return subprocess.run(["bash", "-c", script], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=BLOCK_SECONDS)


@pytest.mark.slow
@pytest.mark.timeout(1200)  # a tutorial's venv installs its dependencies from the index
@pytest.mark.parametrize("doc", RUN, ids=[str(p.relative_to(REPO)) for p in RUN])
def test_page_shell_blocks_run(doc: Path, wheel_and_venv: tuple[Path, Path], fresh_db_url: str,
                               tmp_path: Path) -> None:
    wheel, venv = wheel_and_venv
    db_url = _as_url(fresh_db_url)
    folder = tmp_path / "work"
    (folder / "myapp").mkdir(parents=True)
    (folder / "myapp" / "__init__.py").write_text(APP)
    (folder / "myapp" / "tasks.py").write_text(TASKS)
    shutil.copy(REPO / "Procfile", folder / "Procfile")  # the repository's, which `honcho start` in a checkout runs
    state = tmp_path / "state"
    state.mkdir()
    env = _environment(venv, wheel, db_url, tmp_path)
    cwd = folder
    tutorial = doc.parent.name == "tutorial"
    python: PythonSession | None = None
    try:
        for block in blocks(doc):
            if block.file is not None:
                target = cwd / block.file
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(block.source)
                continue
            if tutorial and block.runs:
                python = python or PythonSession(env, cwd, state)
                failure = python.run(block.page, block.line, block.source)
                assert failure is None, f"{block.page}:{block.line} in the tutorial's venv:\n{failure}"
                continue
            if not block.shell_runs:
                continue
            source = URL.sub(db_url, block.source)
            result = _run_block(source, env, cwd, state)
            assert result.returncode == 0, (
                f"{block.page}:{block.line} exits {result.returncode}\n{block.source}\n"
                f"--- stdout\n{result.stdout[-6000:]}\n--- stderr\n{result.stderr[-4000:]}")
            env = dict(item.split("=", 1) for item in (state / "env").read_text().split("\0") if "=" in item)
            cwd = Path((state / "cwd").read_text().strip())
    finally:
        if python is not None:
            python.close()


def test_every_shell_block_runs_or_says_why_not() -> None:
    """An unmarked shell block is run by the test above; a marked one gives a reason of some length."""
    hidden = []
    for page in pages():
        for block in blocks(page):
            if block.illustrative is not None:
                assert block.language in (*SHELL, "text"), f"{block.page}:{block.line}: marks shell blocks, transcripts"
                assert len(block.illustrative.strip()) >= 10, f"{block.page}:{block.line}: say why it is not run"
            first = block.source.lstrip().split(" ", 1)[0]
            commands = ("$", "skiplock", "pip", "gunicorn", "honcho", "python")
            if block.language not in SHELL and block.illustrative is None and first in commands:
                hidden.append(f"{block.page}:{block.line}")
    assert not hidden, f"a command outside a shell block hides from this test: {hidden}"


def test_the_runner_fails_an_unmarked_block_that_fails(tmp_path: Path) -> None:
    """The runner itself: a failing command fails, a server is started, found ready and stopped."""
    env = {"PATH": "/usr/bin:/bin"}
    failing = _run_block("true\nfalse\necho never", env, tmp_path, tmp_path)
    assert failing.returncode != 0 and "never" not in failing.stdout
    served = _run_block('_serve "ready" -- bash -c \'echo ready; exec sleep 60\'', env, tmp_path, tmp_path)
    assert served.returncode == 0 and "ready and stopped" in served.stdout, served.stdout + served.stderr
    dying = _run_block('_serve "ready" -- bash -c \'echo booting; exit 3\'', env, tmp_path, tmp_path)
    assert dying.returncode != 0 and "exited before it was ready" in dying.stdout
