"""What each entry point imports: a producer-only process and the console load only their own layers."""

from __future__ import annotations

import subprocess
import sys


def _loaded(imports: str, watched: tuple[str, ...]) -> list[str]:
    code = f"import sys; {imports}; print(sorted(m for m in {watched!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return eval(out)


def test_a_producer_only_import_does_not_load_the_worker_runtime() -> None:
    assert _loaded("import skiplock; skiplock.enqueue",
                   ("skiplock.runner", "apscheduler.schedulers", "skiplock.recurring_service",
                    "skiplock.maintenance", "flask")) == []


def test_the_console_does_not_import_the_command_line() -> None:
    assert _loaded("import skiplock.webapp, skiplock.webapp.ops",
                   ("skiplock.cli", "skiplock.doctor_cli", "skiplock.bench", "skiplock.cancel_cli",
                    "skiplock.recurring_cli", "skiplock.runner")) == []


def test_only_the_queue_core_writes_jobs() -> None:
    """One database boundary: the statements that write `jobs` live in the core's query modules; the
    console, the CLI, the benchmark and the runtime call the core's functions (issue 18)."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    writes = re.compile(r"\b(INSERT\s+INTO|UPDATE|DELETE\s+FROM)\s+jobs\b", re.I)
    writers = {str(p.relative_to(root)) for folder in ("worker", "webapp") for p in (root / folder).rglob("*.py")
               if writes.search(p.read_text())}
    # queries.py holds the core's statements; the others are core modules with one statement family each
    assert writers == {"worker/queries.py", "worker/attempts.py", "worker/cancel.py",
                       "worker/snooze.py"}, writers
