"""Issue 37's module moves, as a script: `git mv` each module and rewrite the imports and paths that name it.

The structure branch made its moves with this script, one commit per step. Run it again after merging a branch
written before them (`python .ci/issue37_renames.py --rewrite-only`): it rewrites what that branch added
(`from skiplock.core import queries`, `skiplock.core.config`, `worker/core/core.py` ...) to the new homes,
and sorts the imports with ruff. Delete it once every branch of that time is merged.

Left alone: CHANGELOG.md and tests/benchmarks/results/ (history), migrations/ (applied SQL and the function
files other branches edit), and .git.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCES = {"skiplock.webapp": "webapp", "skiplock": "worker"}  # longest prefix first

# (step, old module, new module), in the order they were made; old.Name -> new.Name moves one name
MOVES = [
    # step 1: the loose top-level modules into their layers (the public ones keep a re-export at the old path)
    (1, "skiplock.adapters", "skiplock.core.adapters"),
    (1, "skiplock.typed", "skiplock.core.typed"),
    (1, "skiplock.hooks", "skiplock.core.hooks"),
    (1, "skiplock.producer_async", "skiplock.core.producer_async"),
    (1, "skiplock.recurring_defs", "skiplock.services.recurring_defs"),
    (1, "skiplock.testing", "skiplock.tools.testing"),
    # step 2: the task table imports nothing above it (producer -> registry -> typed -> producer_async -> producer)
    (2, "skiplock.core.registry.JobContext", "skiplock.core.job_context.JobContext"),
    (2, "skiplock.core.registry.task", "skiplock.core.task_decorator.task"),
    # step 3: core/ divided into the queue, its plumbing and its features; two files named for what they hold
    (3, "skiplock.core.core", "skiplock.core.state_changes"),
    (3, "skiplock.core.queries", "skiplock.core.statements"),
    (3, "skiplock.webapp.queries", "skiplock.webapp.page_queries"),
    *((3, f"skiplock.core.{name}", f"skiplock.core.plumbing.{name}")
      for name in ("adapters", "config", "databases", "db", "deadline", "logs", "migrate", "resources", "tracing")),
    *((3, f"skiplock.core.{name}", f"skiplock.core.features.{name}")
      for name in ("attempts", "audit", "cancel", "error_summary", "handoff", "hooks", "limits", "progress",
                   "run_times", "snooze", "versions", "waiting", "worker_control")),
    *((3, f"skiplock.core.{name}", f"skiplock.core.workflows.{name}")
      for name in ("links", "results", "workflow_ops", "workflow_repair")),
    # step 6: no loop and no arrow up in the core. links.py split: batches keep the file (the linked insert the
    # producer calls went to core/linked_insert.py by hand); the ack's attempts and snooze went into
    # state_changes.py by hand (their constants follow here); the error summary, a pure rule, under the queue
    (6, "skiplock.core.workflows.links", "skiplock.core.workflows.batches"),
    (6, "skiplock.core.features.attempts.KEEP_ATTEMPTS", "skiplock.core.state_changes.KEEP_ATTEMPTS"),
    (6, "skiplock.core.features.attempts.ERROR_CHARS", "skiplock.core.state_changes.ERROR_CHARS"),
    (6, "skiplock.core.features.error_summary", "skiplock.core.error_summary"),
]
# Public import paths (docs/reference/api.md) that stay as thin re-export modules: not rewritten in users' code,
# docs or the tests that test the public path.
PUBLIC = {"skiplock.testing", "skiplock.hooks", "skiplock.producer_async", "skiplock.recurring_defs"}

SKIP_PARTS = {".git", "skiplock.egg-info", "migrations", "results", "__pycache__"}
SUFFIXES = {".py", ".md", ".toml", ".yml", ".yaml", ".txt", ".cfg", ".ini", ".html", ""}


def path_of(module: str) -> str:
    """worker/core/config.py for skiplock.core.config (the checkout's folder mapping)."""
    for package, folder in SOURCES.items():
        if module == package or module.startswith(package + "."):
            rest = module[len(package):].lstrip(".").split(".")
            return "/".join([folder, *rest]) + ".py"
    raise ValueError(module)


def text_files() -> list[Path]:
    listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    files = []
    for name in listed.splitlines():
        path = ROOT / name
        if (SKIP_PARTS & set(Path(name).parts) or name == "CHANGELOG.md" or path.suffix not in SUFFIXES
                or not path.is_file() or name == ".ci/issue37_renames.py"):
            continue
        files.append(path)
    return files


def _split_from_import(text: str, old: str, new: str) -> tuple[str, bool]:
    """`from P import a, x` -> `from P import x` + `from Q import b`; True when `a` was imported unaliased
    under a name that changes (its uses `a.` are renamed then)."""
    old_pkg, _, old_name = old.rpartition(".")
    new_pkg, _, new_name = new.rpartition(".")
    renamed = False
    pattern = re.compile(rf"^(?P<indent>[ \t]*)from {re.escape(old_pkg)} import "
                         r"(?P<names>[^(\n#]+?)(?P<tail>[ \t]*#.*)?$", re.M)

    def fix(match: re.Match[str]) -> str:
        nonlocal renamed
        names = [n.strip() for n in match["names"].split(",") if n.strip()]
        kept, moved = [], []
        for item in names:
            if item.split(" as ")[0].strip() == old_name:
                alias = item.split(" as ")[1].strip() if " as " in item else None
                if alias is None and new_name != old_name:
                    renamed = True
                moved.append(new_name + (f" as {alias}" if alias and alias != new_name else ""))
            else:
                kept.append(item)
        if not moved:
            return match[0]
        indent, tail = match["indent"], match["tail"] or ""
        lines = [f"{indent}from {old_pkg} import {', '.join(kept)}{tail}"] if kept else []
        lines.append(f"{indent}from {new_pkg} import {', '.join(moved)}" + ("" if kept else tail))
        return "\n".join(lines)

    return pattern.sub(fix, text), renamed


def _open_column(line: str) -> int | None:
    """The column after the innermost bracket `line` leaves open (where its continuation lines align)."""
    stack: list[int] = []
    quote = None
    for column, char in enumerate(line):
        if quote:
            quote = None if char == quote else quote
        elif char in "\"'":
            quote = char
        elif char == "#":
            break
        elif char in "([{":
            stack.append(column)
        elif char in ")]}" and stack:
            stack.pop()
    return stack[-1] + 1 if stack else None


def _rename_uses(text: str, old_name: str, new_name: str) -> str:
    """`queries.X` -> `statements.X`, and the continuation lines aligned under a bracket of a renamed line
    move with it (the code aligns them under the opening bracket)."""
    use = re.compile(rf"(?<![\w./]){re.escape(old_name)}\.(?=[A-Za-z_])")
    lines = text.split("\n")
    shift_from = shift_to = None
    for index, line in enumerate(lines):
        if shift_from is not None and line.strip() and len(line) - len(line.lstrip(" ")) == shift_from:
            line = " " * shift_to + line.lstrip(" ")
        elif shift_from is not None and line.strip():
            shift_from = shift_to = None
        new_line = use.sub(f"{new_name}.", line)
        if new_line != line:
            before, after = _open_column(line), _open_column(new_line)
            if before is not None and after is not None and before != after:
                shift_from, shift_to = before, after
        lines[index] = new_line
    return "\n".join(lines)


def rewrite(text: str, old: str, new: str, *, path_only: bool = False, imports_only: bool = False) -> str:
    if imports_only:  # a public path: its imports follow the code, its mentions in words stay
        text, _ = _split_from_import(text, old, new)
        text = re.sub(rf"^([ \t]*(?:from|import) ){re.escape(old)}(?=[ .\n])", rf"\g<1>{new}", text, flags=re.M)
    elif not path_only:
        text, renamed = _split_from_import(text, old, new)
        # a logger's name ("skiplock.hooks") is what users configure, not an import path
        text = re.sub(rf"(?<![\w.])(?<!getLogger\(\"){re.escape(old)}(?!\w)", new, text)
        old_name, new_name = old.rpartition(".")[2], new.rpartition(".")[2]
        if renamed:
            text = _rename_uses(text, old_name, new_name)
    old_path, new_path = path_of(old), path_of(new)
    text = re.sub(rf"(?<![\w/.]){re.escape(old_path)}", new_path, text)
    text = re.sub(rf"(?<![\w/.])skiplock/{re.escape(old_path.partition('/')[2])}",
                  "skiplock/" + new_path.partition("/")[2], text)
    if old_path.count("/") >= 2:  # core/config.py, as the package's own comments name it (not a bare config.py)
        short_old, short_new = old_path.partition("/")[2], new_path.partition("/")[2]
        text = re.sub(rf"(?<![\w/.]){re.escape(short_old)}", short_new, text)
    return text


def public_user(path: Path) -> bool:
    """docs, README and examples show the public paths; so do the tests of those paths (the rest of the
    tests import the modules where they live)."""
    rel = path.relative_to(ROOT).as_posix()
    return (rel.startswith(("docs/", "examples/", "tests/docs/"))
            or rel in {"README.md", "mkdocs.yml", "tests/integration/test_testing_plugin.py",
                       "tests/unit/test_public_paths.py", "tests/unit/test_layers.py"}
            or rel in {path_of(module) for module in PUBLIC})  # the re-export modules name both paths


def main(argv: list[str]) -> None:
    steps = {int(a) for a in argv if a.isdigit()} or {step for step, _, _ in MOVES}
    rewrite_only = "--rewrite-only" in argv
    moves = [(old, new) for step, old, new in MOVES if step in steps]
    if not rewrite_only:
        for old, new in moves:
            src, dst = ROOT / path_of(old), ROOT / path_of(new)
            if not src.exists():
                continue
            dst.parent.mkdir(parents=True, exist_ok=True)
            if not (dst.parent / "__init__.py").exists():
                (dst.parent / "__init__.py").write_text("")
                subprocess.run(["git", "add", str(dst.parent / "__init__.py")], cwd=ROOT, check=True)
            subprocess.run(["git", "mv", str(src), str(dst)], cwd=ROOT, check=True)
    for path in text_files():
        text = original = path.read_text()
        for old, new in moves:
            public = old in PUBLIC
            text = rewrite(text, old, new, path_only=public and public_user(path),
                           imports_only=public and not public_user(path) and rewrite_only)
        if text != original:
            path.write_text(text)
            print("rewrote", path.relative_to(ROOT))
    subprocess.run(["ruff", "check", "--fix", "--select", "I", "--quiet", "."], cwd=ROOT)


if __name__ == "__main__":
    main(sys.argv[1:])
