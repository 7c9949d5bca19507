"""The package's layers, checked over its import graph (docs/architecture.md, "Import directions").

Read from the source with ``ast`` (nothing is imported): every ``import scoville...`` / ``from scoville... import``,
marked lazy when it sits inside a function. The rules a new import must not break:

* the library never imports the CLI (the CLI is a shell over it, and the Python API calls the library);
* the foundations (workloads, load plans and the load policy, run schema and storage, specs, statistics, SLOs,
  the hardware and model catalogs) import nothing that measures, simulates, emulates, analyses or reports;
* analysis and reporting read runs only: no client, simulator, emulator or executor;
* the measuring client imports neither the simulator nor the emulator (it is given a URL, or a way to start one);
* the executor runs work it is handed and imports none of the client, simulator or emulator;
* no two packages reach each other, through module-level or lazy (function-level) imports alike.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from functools import lru_cache
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
FOUNDATIONS = ("scoville.workload", "scoville.load", "scoville.load_policy", "scoville.errors", "scoville.spec",
               "scoville.numbers", "scoville.slo", "scoville.stats", "scoville.summary", "scoville.results",
               "scoville.catalog")
UPPER = ("scoville.client", "scoville.sim", "scoville.emulator", "scoville.executor", "scoville.reporting",
         "scoville.analysis", "scoville.cli")


def _module(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@lru_cache(maxsize=1)
def imports() -> tuple[tuple[str, str, bool], ...]:
    """(importer, imported, lazy) for every scoville import in the source tree (parsed once per session)."""
    edges: list[tuple[str, str, bool]] = []
    for path in SRC.rglob("*.py"):
        def walk(node: ast.AST, lazy: bool, importer: str) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.If) and getattr(child.test, "id", None) == "TYPE_CHECKING":
                    continue                                    # annotations only, never executed
                inner = lazy or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
                if isinstance(child, ast.ImportFrom) and child.level == 0 and (child.module or "").startswith(
                        "scoville"):
                    edges.append((importer, child.module or "", inner))
                elif isinstance(child, ast.Import):
                    edges.extend((importer, a.name, inner) for a in child.names if a.name.startswith("scoville"))
                walk(child, inner, importer)

        walk(ast.parse(path.read_text()), False, _module(path))
    return tuple(edges)


def _in(module: str, packages: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


def _package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _cycles(graph: dict[str, set[str]]) -> set[frozenset[str]]:
    """Every pair of packages that reach each other (the cycles, by the packages on them, two at a time)."""
    def reach(start: str) -> set[str]:
        seen, todo = set(), [start]
        while todo:
            for n in graph.get(todo.pop(), ()):
                if n not in seen:
                    seen.add(n)
                    todo.append(n)
        return seen

    reached = {p: reach(p) for p in graph}
    return {frozenset({a, b}) for a in graph for b in reached[a] if a != b and a in reached.get(b, ())}


def test_the_library_never_imports_the_cli():
    assert [(a, b) for a, b, _ in imports() if _in(b, ("scoville.cli",)) and not _in(a, ("scoville.cli",))] == []


def test_the_foundations_import_nothing_above_them():
    assert [(a, b) for a, b, _ in imports() if _in(a, FOUNDATIONS) and _in(b, UPPER)] == []


def test_analysis_and_reporting_read_runs_only():
    measuring = ("scoville.client", "scoville.sim", "scoville.emulator", "scoville.executor")
    assert [(a, b) for a, b, _ in imports()
            if _in(a, ("scoville.analysis", "scoville.reporting")) and _in(b, measuring)] == []


def test_the_measuring_client_never_imports_the_simulator_or_the_emulator():
    assert [(a, b) for a, b, _ in imports()
            if _in(a, ("scoville.client",)) and _in(b, ("scoville.sim", "scoville.emulator"))] == []


def test_the_executor_imports_none_of_the_work_it_runs():
    assert [(a, b) for a, b, _ in imports() if _in(a, ("scoville.executor",))
            and _in(b, ("scoville.client", "scoville.sim", "scoville.emulator"))] == []


def test_no_two_packages_import_each_other_lazily_or_not():
    graph: dict[str, set[str]] = defaultdict(set)
    for a, b, _ in imports():
        pa, pb = _package(a), _package(b)
        if pa != pb and pb != "scoville":
            graph[pa].add(pb)
    assert _cycles(graph) == set()
