"""skiplock's wheel built from the checkout: what a user installs before the first release, and what the
wheel tests (examples, tutorials, the docs' shell blocks) install into fresh virtualenvs."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent.parent


def built_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel, built once per run (`pip wheel --no-deps` of the checkout) and returned by path.

    Under pytest-xdist the first process to get here builds it into a folder all the processes share,
    under a file lock the others wait on: two builds at once in one checkout clash in its build/ folder.
    The folder and the lock are tests/integration/test_package.py's, which builds there too."""
    base = tmp_path_factory.getbasetemp()
    out = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "skiplock-dists"
    out.mkdir(exist_ok=True)
    with open(out / "build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (out / "wheel-built").exists():
            build = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", str(REPO),
                                    "-w", str(out / "wheel")], cwd=out, capture_output=True, text=True, timeout=300)
            assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
            (out / "wheel-built").touch()
    return next((out / "wheel").glob("skiplock-*.whl"))


def fresh_venv(where: Path, *requirements: str) -> Path:
    """A new virtualenv at `where` with nothing of this interpreter's packages, and `requirements`
    installed by pip from its configured index; returns its folder."""
    base = getattr(sys, "_base_executable", sys.executable)  # this may itself be a venv's python
    subprocess.run([base, "-m", "venv", str(where)], check=True, timeout=120)
    if requirements:
        install = subprocess.run([str(where / "bin" / "python"), "-m", "pip", "install", "-q", *requirements],
                                 capture_output=True, text=True, timeout=600)
        assert install.returncode == 0, install.stdout[-3000:] + install.stderr[-3000:]
    return where
