"""The `skiplock` command's registry: each sub-command module adds its command here with `@command`.

tools/cli.py imports every sub-command module by name, then builds the parser from COMMANDS. The
registry is a module of its own so that a sub-command module (web_cli, bench, ...) does not import
cli.py, which imports it: no import loop.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

Run = Callable[[argparse.Namespace], int]

# name -> (help, add arguments, run), in the order the modules register them
COMMANDS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], None], Run]] = {}


def command(name: str, help_text: str, add_args: Callable[[argparse.ArgumentParser], None]
            ) -> Callable[[Run], Run]:
    """Register `skiplock NAME`; the decorated function gets the parsed args and returns an exit code."""

    def register(run: Run) -> Run:
        COMMANDS[name] = (help_text, add_args, run)
        return run

    return register
