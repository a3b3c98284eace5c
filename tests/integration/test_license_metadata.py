"""The package's license is declared in the form setuptools keeps building (issue 35, defect 9).

`project.license` as a TOML table ({ text = "MIT" }) is deprecated: setuptools warns on every build
and stops building it after 2027-02-18. The SPDX string form (license = "MIT") is what it wants.
"""

from __future__ import annotations

import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.slow


def test_the_sdist_builds_without_the_license_deprecation_and_says_mit(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "build", "--sdist", "--outdir", str(tmp_path), str(REPO)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output
    assert "project.license` as a TOML table is deprecated" not in output
    assert "SPDX" not in output, output
    sdist = next(tmp_path.glob("skiplock-*.tar.gz"))
    with tarfile.open(sdist) as archive:
        member = next(m for m in archive.getmembers() if m.name.count("/") == 1 and m.name.endswith("/PKG-INFO"))
        pkg_info = archive.extractfile(member).read().decode()  # type: ignore[union-attr]
    assert "License-Expression: MIT" in pkg_info.splitlines()
