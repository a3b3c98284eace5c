"""The folders and the tests the docs send a reader to are there.

tests/docs/test_site.py checks the files the docs name. This checks the rest of what a reader follows
when a page says where a change starts: a folder of the repository (`worker/core/sql/`), and a test by
name (`tests/unit/test_layers.py::test_the_package_has_no_import_loop`), which must be defined in that
file, so renaming a test or moving a folder fails here instead of leaving the page pointing nowhere.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.docs.examples import REPO, pages

ROOTS = r"(?:tests|examples|worker|webapp|migrations|templates|static|docs)"
# a folder: the path ends with a slash (a placeholder such as `templates/<area>/` is left out)
FOLDER = re.compile(rf"(?<![\w/.-])({ROOTS}/(?:[\w.-]+/)*)(?![\w<])")
TEST = re.compile(rf"(?<![\w/.-])({ROOTS}/[\w./-]+\.py)::(\w+)")


def defined_names(path: Path) -> set[str]:
    """The functions and classes defined anywhere in a Python file."""
    tree = ast.parse(path.read_text())
    return {node.name for node in ast.walk(tree)
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)}


def missing_in(text: str) -> list[str]:
    """What `text` names that the repository does not have."""
    found = [folder for folder in FOLDER.findall(text) if not (REPO / folder).is_dir()]
    for file, name in TEST.findall(text):
        path = REPO / file
        if not path.is_file():
            found.append(f"{file}::{name} (no such file)")
        elif name not in defined_names(path):
            found.append(f"{file}::{name}")
    return found


def test_the_check_finds_a_missing_folder_and_a_missing_test() -> None:
    text = ("`worker/core/sql/` and `worker/nowhere/`, `templates/<area>/`, "
            "`tests/unit/test_layers.py::test_the_package_has_no_import_loop` and "
            "`tests/unit/test_layers.py::test_that_was_renamed`")
    assert missing_in(text) == ["worker/nowhere/", "tests/unit/test_layers.py::test_that_was_renamed"]


def test_every_folder_and_test_the_docs_name_exists() -> None:
    missing = sorted(f"{page.relative_to(REPO)}: {item}" for page in pages() for item in missing_in(page.read_text()))
    assert not missing, missing
