"""The package's layers: each imports only the layers below it, and each entry point loads only its own."""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Where each part of the `skiplock` package lives in the checkout (pyproject.toml's package-dir).
SOURCES = {"skiplock": ROOT / "worker", "skiplock.webapp": ROOT / "webapp"}

# The layers, lowest first: a module may import modules of its own layer and of the layers before it.
# A layer is a sub-package of skiplock (the console is skiplock.webapp). skiplock.django, the django.tasks
# backend, starts the worker (runtime) and the console names a Django task's job with it (webapp).
LAYERS = ["core", "monitor", "services", "runtime", "django", "webapp", "tools"]
# The package's top-level modules: `skiplock` itself, `python -m skiplock`, and the public import paths of
# docs/reference/api.md, each a re-export of the module in its layer (issue 37), on the layer it re-exports.
TOP_LEVEL = {
    "skiplock": "tools",
    "skiplock.__main__": "tools",
    "skiplock.hooks": "core",
    "skiplock.producer_async": "core",
    "skiplock.recurring_defs": "services",
    "skiplock.testing": "tools",
}


def package_modules() -> dict[str, Path]:
    """Every module of the package by its import name."""
    modules = {}
    for package, folder in SOURCES.items():
        for path in folder.rglob("*.py"):
            parts = [package, *path.relative_to(folder).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join(parts)] = path
    return modules


def import_graph(modules: Mapping[str, Path]) -> dict[str, set[str]]:
    """module -> the package's modules it imports (anywhere in the file, lazy imports included)."""
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, *([base] if base else [])])
                # `from a import b` imports the module a.b when there is one, else a name of a
                targets.update(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                               for alias in node.names)
        graph[name] = {t for t in targets if t in modules and t != name}
    return graph


def layer_of(module: str) -> str | None:
    if module in TOP_LEVEL:
        return TOP_LEVEL[module]
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in LAYERS else None


def layer_violations(graph: Mapping[str, set[str]]) -> list[str]:
    """Every import that points to a higher layer, and every module that is on no layer."""
    found = []
    for module, targets in sorted(graph.items()):
        layer = layer_of(module)
        if layer is None:
            found.append(f"{module} is on no layer")
            continue
        for target in sorted(targets):
            up = layer_of(target)
            if up is not None and LAYERS.index(up) > LAYERS.index(layer):
                found.append(f"{module} ({layer}) imports {target} ({up})")
    return found


def test_each_layer_imports_only_the_layers_below_it() -> None:
    graph = import_graph(package_modules())
    assert len(graph) > 60 and {layer_of(m) for m in graph} == set(LAYERS), sorted(graph)
    assert layer_violations(graph) == []  # type-only imports (`if TYPE_CHECKING:`) count too


def test_the_top_level_holds_only_the_package_and_its_public_re_exports() -> None:
    """Every other module sits in the folder of its layer (issue 37); a re-export is a few lines."""
    modules = package_modules()
    top = sorted(m for m in modules if m.count(".") <= 1 and not m.startswith("skiplock.webapp")
                 and m.split(".")[-1] not in LAYERS)
    assert top == sorted(TOP_LEVEL), top
    for name in ("skiplock.hooks", "skiplock.producer_async", "skiplock.recurring_defs", "skiplock.testing"):
        tree = ast.parse(modules[name].read_text())
        # an `if` may choose what to re-export (skiplock.testing's fixtures only when pytest is installed)
        allowed = ast.Expr | ast.Import | ast.ImportFrom | ast.Assign | ast.If
        assert all(isinstance(node, allowed) for node in tree.body), name
        assert all(isinstance(inner, ast.ImportFrom | ast.Assign) for node in tree.body if isinstance(node, ast.If)
                   for inner in node.body), name


def test_the_worker_parts_do_not_import_the_wiring_or_each_other_but_downward() -> None:
    """runtime/runner.py wires the claimer, the executor and the shutdown; the shutdown ends the
    executor's handlers; the claimer and the executor know neither each other nor the wiring."""
    graph = import_graph(package_modules())
    wiring, parts = "skiplock.runtime.runner", ["claimer", "executor", "shutdown"]
    among = {wiring, *(f"skiplock.runtime.{part}" for part in parts)}
    assert {part: sorted(graph[f"skiplock.runtime.{part}"] & among) for part in parts} == {
        "claimer": [], "executor": [], "shutdown": ["skiplock.runtime.executor"]}
    assert sorted(m for m, targets in graph.items() if wiring in targets) == ["skiplock.django.worker",
                                                                               "skiplock.tools.cli"]


def import_loops(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The import loops: each group of two or more modules that reach one another (Tarjan's SCCs)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    loops: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for target in sorted(graph.get(module, ())):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            group = []
            while (member := stack.pop()) != module:
                group.append(member)
            if group:
                loops.append(sorted([*group, module]))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return sorted(loops)


def test_the_loops_broken_in_issue_37_stay_broken() -> None:
    """The command line's sub-commands register in tools/commands.py (cli -> dev -> web_cli -> cli), the
    core's records live in core/records.py and the ack's attempts and snooze in state_changes.py (core <->
    attempts, snooze), the recurring store reads a
    Protocol of a definition (recurring_defs <-> services/recurring_store), and the task table no longer
    imports @task's handle or the handler's JobContext (producer -> registry -> typed -> producer_async ->
    producer), and the linked insert (core/linked_insert.py) runs through the producer's execute, below it,
    while batches sit above it (producer <-> workflows/links.py <-> producer_async): none is in a loop."""
    assert import_loops({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    loops = import_loops(import_graph(package_modules()))
    freed = {"skiplock.tools.cli", "skiplock.tools.dev", "skiplock.tools.web_cli", "skiplock.core.state_changes",
             "skiplock.services.recurring_defs",
             "skiplock.services.recurring_store", "skiplock.core.registry", "skiplock.core.typed",
             "skiplock.core.workflows.results", "skiplock.core.job_context", "skiplock.core.task_decorator",
             "skiplock.core.producer", "skiplock.core.producer_async", "skiplock.core.linked_insert",
             "skiplock.core.workflows.batches"}
    assert [loop for loop in loops if freed & set(loop)] == [], loops


# Loops left on purpose, each with why: none. (The last, webapp <-> webapp/mount.py, ended when create_app
# moved to webapp/app.py and create_multi_app to webapp/multi_app.py.)
KNOWN_LOOPS: list[list[str]] = []


def test_the_package_has_no_import_loop() -> None:
    """No two modules import each other, directly or round a circle (the console's job page and its "Edit
    and retry" share the form in webapp/shared/edit_form.py): only the known loops above are left."""
    assert [loop for loop in import_loops(import_graph(package_modules())) if loop not in KNOWN_LOOPS] == []


def test_the_core_plumbing_knows_no_feature_and_no_transition() -> None:
    """core/plumbing/ (config, connections, migrations, logs, tracing) sits under the rest of the core: it
    imports only itself, the errors and the state names (issue 37's division of core/)."""
    graph = import_graph(package_modules())
    allowed = {"skiplock.core.errors", "skiplock.core.status"}
    plumbing = {m for m in graph if m.startswith("skiplock.core.plumbing")}
    assert len(plumbing) >= 9
    assert {m: sorted(t - plumbing - allowed) for m in plumbing if (t := graph[m]) - plumbing - allowed} == {}


# The core's own floors, lowest first: a module of the core imports only its own floor and the floors before
# it, so none of its arrows runs back up (issue 37). A floor is one of the core's folders, or named modules at
# its top; a new module of the core's top must be given a floor here.
CORE_FLOORS: list[tuple[str, set[str]]] = [
    # the words and the statements: imports nothing of the package
    ("vocabulary", {"skiplock.core", "skiplock.core.errors", "skiplock.core.status", "skiplock.core.records",
                    "skiplock.core.task_defaults", "skiplock.core.task_options", "skiplock.core.backoff",
                    "skiplock.core.error_summary", "skiplock.core.sql"}),
    ("plumbing/", set()),
    # the queue itself: the transitions (the ack writes a failure's attempts and a snooze), the task table,
    # the producer and the linked insert it calls
    ("queue", {"skiplock.core.state_changes", "skiplock.core.registry", "skiplock.core.linked_insert",
               "skiplock.core.schema_state",  # is the database migrated (a worker and the console ask)
               "skiplock.core.unique_for", "skiplock.core.producer", "skiplock.core.producer_async"}),
    ("features/", set()),
    ("workflows/", set()),
    # durable jobs' steps, cursors, parking and signals (docs/explanation/durable-jobs.md): the queue's producer
    # pool below them, a handler's `job` above
    ("durable/", set()),
    # what an operator and a task's author call: the operator's actions, @task, typed tasks, a handler's `job`
    ("faces", {"skiplock.core.transitions", "skiplock.core.task_decorator", "skiplock.core.typed",
               "skiplock.core.job_context",
               "skiplock.core.batch_handlers"}),  # a batch handler's options and its jobs' JobContext
]


def core_floor(module: str) -> int | None:
    """The index of `module`'s floor in CORE_FLOORS (None: not a module of the core, or on no floor)."""
    for index, (name, members) in enumerate(CORE_FLOORS):
        folder = "skiplock.core." + name.rstrip("/")
        if module in members or (name.endswith("/") and (module == folder or module.startswith(folder + "."))):
            return index
    return None


def test_inside_the_core_each_floor_imports_only_the_floors_below_it() -> None:
    """The ack's own writes (attempts, snooze) live in state_changes.py and the error summary below it, so no
    feature is imported by the queue that the features call; the linked insert sits below the producer and
    batches above it. What is on no floor, or imports a floor above its own, is listed."""
    graph = import_graph(package_modules())
    core = sorted(m for m in graph if m == "skiplock.core" or m.startswith("skiplock.core."))
    assert [m for m in core if core_floor(m) is None] == []
    up = [f"{m} ({CORE_FLOORS[core_floor(m) or 0][0]}) imports {t} ({CORE_FLOORS[core_floor(t) or 0][0]})"
          for m in core for t in sorted(graph[m]) if t in core and (core_floor(t) or 0) > (core_floor(m) or 0)]
    assert up == []
    assert import_loops({m: graph[m] & set(core) for m in core}) == []


def test_the_task_table_imports_nothing_above_it() -> None:
    """The producer reads the task table (core/registry.py), so the table imports only the errors: `@task`
    (core/task_decorator.py) and a handler's `job` (core/job_context.py) sit above it (issue 37)."""
    graph = import_graph(package_modules())
    assert graph["skiplock.core.registry"] == {"skiplock.core.errors"}


def test_the_layer_check_reports_an_upward_import_and_a_stray_module() -> None:
    fake = {"skiplock.core.state_changes.queries": {"skiplock.runtime.runner", "skiplock.core.state_changes.status"},
            "skiplock.runtime.runner": {"skiplock.core.state_changes.queries"},
            "skiplock.webapp.jobs": {"skiplock.tools.cli", "skiplock.monitor.why"},
            "skiplock.extras.thing": set()}
    assert layer_violations(fake) == [
        "skiplock.core.state_changes.queries (core) imports skiplock.runtime.runner (runtime)",
        "skiplock.extras.thing is on no layer",
        "skiplock.webapp.jobs (webapp) imports skiplock.tools.cli (tools)",
    ]


# The console's pages: one area each, webapp/pages/<area>.py, or a folder when an area has several
# blueprints (pages/jobs/: the job page, its Cancel, its "Edit and retry"). Only the console's entry points
# import a page: the app factory registers them, mount() and the several-databases console add /databases/.
PAGES = "skiplock.webapp.pages"
PAGE_IMPORTERS = {"skiplock.webapp.app", "skiplock.webapp.mount", "skiplock.webapp.multi_app"}


def page_area(module: str) -> str | None:
    """The area of a page module (`overview`, `jobs`, ...); None for a module that is not a page."""
    if not module.startswith(PAGES + "."):
        return None
    return module[len(PAGES) + 1:].split(".")[0]


def page_violations(graph: Mapping[str, set[str]]) -> list[str]:
    """Every import of a page by another area's page, or by a module that is not an entry point: what two
    pages share goes in webapp/shared/ (or webapp/queries/ for SQL), so one page can change alone."""
    found = []
    for module, targets in sorted(graph.items()):
        for target in sorted(targets):
            area = page_area(target)
            if area is None or module in PAGE_IMPORTERS or page_area(module) == area:
                continue
            found.append(f"{module} imports the page {target}")
    return found


def test_a_page_imports_shared_modules_never_another_page() -> None:
    graph = import_graph(package_modules())
    areas = {page_area(m) for m in graph} - {None}
    assert {"overview", "queues", "dead", "jobs", "search", "workflows"} <= areas, areas
    assert page_violations(graph) == []


def test_the_page_check_reports_a_page_importing_another() -> None:
    fake = {"skiplock.webapp.pages.queues": {"skiplock.webapp.pages.overview", "skiplock.webapp.shared.counts"},
            "skiplock.webapp.pages.jobs.edit_retry": {"skiplock.webapp.pages.jobs.detail"},
            "skiplock.webapp.shared.failure_rate": {"skiplock.webapp.pages.overview"},
            "skiplock.webapp.app": {"skiplock.webapp.pages.overview"}}
    assert page_violations(fake) == [
        "skiplock.webapp.pages.queues imports the page skiplock.webapp.pages.overview",
        "skiplock.webapp.shared.failure_rate imports the page skiplock.webapp.pages.overview",
    ]


def _loaded(imports: str, watched: tuple[str, ...]) -> list[str]:
    code = f"import sys; {imports}; print(sorted(m for m in {watched!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return eval(out)


def test_a_producer_only_import_does_not_load_the_worker_runtime() -> None:
    assert _loaded("import skiplock; skiplock.enqueue",
                   ("skiplock.runtime.runner", "apscheduler.schedulers", "skiplock.services.recurring_service",
                    "skiplock.services.maintenance", "flask")) == []


def test_the_console_does_not_import_the_command_line() -> None:
    assert _loaded("import skiplock.webapp, skiplock.webapp.pages.ops",
                   ("skiplock.tools.cli", "skiplock.tools.doctor_cli", "skiplock.tools.bench",
                    "skiplock.tools.cancel_cli", "skiplock.tools.recurring_cli", "skiplock.runtime.runner")) == []


def test_only_the_queue_core_writes_jobs() -> None:
    """One database boundary: the statements a running system writes `jobs` with live in core/sql/*.sql,
    the core's features' too; the console, the CLI, the benchmark and the runtime call the core's functions
    (issue 18). The benchmarks' bulk seeding (rows no running system makes) is the benchmark tools' (issue 37)."""
    import re

    root = ROOT
    writes = re.compile(r"\b(INSERT\s+INTO|UPDATE|DELETE\s+FROM)\s+jobs\b", re.I)
    writers = {str(p.relative_to(root)) for folder in ("worker", "webapp") for p in (root / folder).rglob("*.py")
               if writes.search(p.read_text())}
    assert writers == {"worker/tools/bench_seed.py"}, writers
