"""Run mypy on the `skiplock` package as it is installed, from the source folders, and on the tests.

The build maps worker/ and webapp/ into one package, `skiplock` (pyproject.toml). An editable
install finds it through an import hook that mypy cannot follow, so this builds the same mapping
as a tree of symbolic links in a temporary folder and points mypy at it (what setuptools'
`editable_mode=strict` does). Usage: `python -m tests.typecheck [extra mypy args]`.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# Where each sub-package of `skiplock` lives in the checkout (pyproject.toml's package-dir).
PACKAGE_DIRS = {"skiplock": REPO / "worker", "skiplock/webapp": REPO / "webapp"}


def link_tree(root: Path) -> None:
    """Mirror PACKAGE_DIRS under `root` with a symlink per entry, like an editable strict install."""
    for package, source in PACKAGE_DIRS.items():
        target = root / package
        target.mkdir(parents=True, exist_ok=True)
        for entry in source.iterdir():
            if entry.name != "__pycache__" and not (target / entry.name).exists():
                (target / entry.name).symlink_to(entry)


def run(extra: list[str]) -> int:
    """mypy over the linked `skiplock` package and the `tests` package; returns mypy's exit status."""
    with tempfile.TemporaryDirectory(prefix="skiplock-mypy-") as tmp:
        link_tree(Path(tmp))
        # the linked tree first, so `skiplock` is the package as installed; the checkout for `tests`
        env = {**os.environ, "MYPYPATH": os.pathsep.join([tmp, str(REPO)])}
        cmd = [sys.executable, "-m", "mypy", "--config-file", str(REPO / "pyproject.toml"), "-p", "skiplock",
               "-p", "tests", *extra]
        return subprocess.run(cmd, cwd=tmp, env=env).returncode


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
