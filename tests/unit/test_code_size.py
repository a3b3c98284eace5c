"""The package stays in pieces a reader can hold: small modules, small classes, short constructors.

A module over 600 lines, a class over 250, or an `__init__` that takes more than 6 parameters (besides
`self`) is a sign that one piece does several jobs; the failure names it, so the fix starts there.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.unit.test_layers import package_modules

MODULE_LINES = 600
CLASS_LINES = 250
INIT_PARAMETERS = 6


def module_too_long(name: str, path: Path) -> list[str]:
    lines = len(path.read_text().splitlines())
    return [f"module {name} has {lines} lines (at most {MODULE_LINES})"] if lines > MODULE_LINES else []


def classes_too_long(name: str, tree: ast.Module) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            # a decorator's lines belong to the class it decorates
            start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            lines = (node.end_lineno or node.lineno) - start + 1
            if lines > CLASS_LINES:
                found.append(f"class {name}.{node.name} has {lines} lines (at most {CLASS_LINES})")
    return found


def inits_too_wide(name: str, tree: ast.Module) -> list[str]:
    found = []
    for owner in ast.walk(tree):
        if not isinstance(owner, ast.ClassDef):
            continue
        for node in owner.body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == "__init__":
                arguments = node.args
                given = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]
                count = len(given) - 1 + (arguments.vararg is not None) + (arguments.kwarg is not None)
                if count > INIT_PARAMETERS:
                    found.append(f"{name}.{owner.name}.__init__ takes {count} parameters besides self "
                                 f"(at most {INIT_PARAMETERS})")
    return found


def size_offenders(modules: dict[str, Path]) -> list[str]:
    found = []
    for name, path in sorted(modules.items()):
        tree = ast.parse(path.read_text())
        found += module_too_long(name, path) + classes_too_long(name, tree) + inits_too_wide(name, tree)
    return found


def test_the_checks_can_fail(tmp_path: Path) -> None:
    wide = "class Wide:\n    def __init__(self, a, b, c, d, e, f, g):\n        pass\n"
    long_class = "class Long:\n" + "    x = 1\n" * CLASS_LINES
    path = tmp_path / "big.py"
    path.write_text(wide + long_class + "\n" * MODULE_LINES)
    assert size_offenders({"big": path}) == [
        f"module big has {MODULE_LINES + 3 + CLASS_LINES + 1} lines (at most {MODULE_LINES})",
        f"class big.Long has {CLASS_LINES + 1} lines (at most {CLASS_LINES})",
        f"big.Wide.__init__ takes 7 parameters besides self (at most {INIT_PARAMETERS})",
    ]


def test_modules_classes_and_constructors_stay_small() -> None:
    modules = package_modules()
    assert len(modules) > 60
    assert size_offenders(modules) == []
