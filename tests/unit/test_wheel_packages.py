"""Every package of the source folders is listed in pyproject.toml, so the wheel a user installs has it.

setuptools ships only the packages [tool.setuptools] names: a new sub-package that is not listed works in
a checkout (an editable install finds it) and is missing from the wheel, where every import of it fails.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = {"skiplock": ROOT / "worker", "skiplock.webapp": ROOT / "webapp"}


def test_every_package_of_the_source_is_in_the_wheel() -> None:
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join([name, *init.parent.relative_to(folder).parts])
             for name, folder in FOLDERS.items() for init in folder.rglob("__init__.py")}
    assert sorted(found - listed) == []
