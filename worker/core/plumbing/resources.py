"""Where skiplock's data files are: migrations, templates, static files (htmx and its checksum).

They travel inside the package (`skiplock.migrations`, `skiplock.templates`, `skiplock.static`,
mapped from the top-level source folders in pyproject.toml), so they are found through the package
itself, never through the current directory: a wheel installed anywhere and an editable checkout
look them up the same way.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path


def data_dir(name: str) -> Path:
    """The folder of the data package `skiplock.<name>` on disk (Flask and the migrator need paths)."""
    root = files(f"skiplock.{name}")
    # A regular package on disk gives a Path; anything else (a zip import) cannot serve files to Flask.
    path = Path(str(root))
    if not path.is_dir():
        raise FileNotFoundError(f"skiplock's {name} folder is missing from the installed package: {path}")
    return path


def migrations_dir() -> Path:
    return data_dir("migrations")


def templates_dir() -> Path:
    return data_dir("templates")


def static_dir() -> Path:
    return data_dir("static")
