"""`skiplock worker` started from a Django project's folder finds the project's settings: the folder is
importable before Django is set up (the console script's sys.path starts at its bin folder)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SETTINGS = """
SECRET_KEY = "k"
INSTALLED_APPS = ["django.contrib.contenttypes", "django.contrib.auth"]
DATABASES = {}
USE_TZ = True
"""


@pytest.mark.slow
def test_the_console_script_sets_django_up_with_the_projects_settings(tmp_path: Path) -> None:
    pytest.importorskip("django")
    (tmp_path / "mysite").mkdir()
    (tmp_path / "mysite" / "__init__.py").write_text("")
    (tmp_path / "mysite" / "settings.py").write_text(SETTINGS)
    script = Path(sys.executable).parent / "skiplock"  # the console script a user types
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",) and not k.startswith("SKIPLOCK_")}
    env.update({"DJANGO_SETTINGS_MODULE": "mysite.settings", "DATABASE_URL": "postgresql://nobody@127.0.0.1:1/x"})
    out = subprocess.run([str(script), "worker", "--tasks", "not_a_task_module"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=120)
    # Django was set up with mysite.settings; what stops the worker is the next step, the task module
    assert "cannot set Django up" not in out.stderr, out.stderr
    assert "cannot import task module 'not_a_task_module'" in out.stderr, out.stderr
    assert out.returncode == 2
