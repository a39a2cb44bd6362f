"""Engines stay behind their modules (docs: ``ledger/engines/`` is the only place that imports an
engine).

- ``pyspark``, ``py4j`` and delta-spark's ``delta`` are imported only by
  ``ledger/engines/spark*.py`` (anywhere in a module: top level, inside functions, under
  ``TYPE_CHECKING``, or by ``importlib.import_module``/``__import__`` with a literal name).
- ``duckdb`` is imported at run time only by ``ledger/engines/duckdb/``. Other modules import it
  under ``TYPE_CHECKING`` for their type hints (``ledger/table.py``, ``ledger/snapshot.py``,
  ``ledger/reads/front.py``, ``ledger/reads/catalog.py``, ``ledger/publish/rows.py`` today);
  that never runs, so it is allowed.
- Importing the packages (every module but the Spark engine itself, and ``ledger.spark``, which
  loads the engine on first use) in a fresh interpreter does not load PySpark.

Parsed with ``ast``, so no module is imported to check it.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("ledger", "views", "merge_policies")
SPARK_MODULES = ("pyspark", "py4j", "delta")


@dataclass(frozen=True)
class Import:
    path: str  # relative to the repository, with forward slashes
    line: int
    module: str  # the top-level module name imported
    type_checking: bool  # only under ``if TYPE_CHECKING:``
    in_function: bool = False  # inside a function (run on its first call, not at import)
    names: tuple[str, ...] = ()  # the dotted modules it may load: ``a.b`` and ``a.b.c``


def _is_type_checking(test: ast.expr) -> bool:
    if isinstance(test, ast.Name):
        return test.id == "TYPE_CHECKING"
    return isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"


def _dynamic_name(node: ast.Call) -> str | None:
    """The literal module name of ``importlib.import_module("x")`` or ``__import__("x")``."""
    func = node.func
    called = (
        func.id
        if isinstance(func, ast.Name)
        else func.attr
        if isinstance(func, ast.Attribute)
        else None
    )
    if called not in ("import_module", "__import__") or not node.args:
        return None
    first = node.args[0]
    return first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else None


class _Imports(ast.NodeVisitor):
    def __init__(self, path: str) -> None:
        self.path = path
        self.found: list[Import] = []
        self._type_checking = 0
        self._functions = 0

    def _add(self, node: ast.AST, module: str, names: tuple[str, ...] = ()) -> None:
        top = module.split(".")[0]
        line = getattr(node, "lineno", 0)
        self.found.append(
            Import(
                self.path,
                line,
                top,
                self._type_checking > 0,
                self._functions > 0,
                names or (module,),
            )
        )

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self._functions += 1
        self.generic_visit(node)
        self._functions -= 1

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> None:
        self._functions += 1
        self.generic_visit(node)
        self._functions -= 1

    def visit_If(self, node: ast.If) -> None:
        if _is_type_checking(node.test):
            self._type_checking += 1
            for child in node.body:
                self.visit(child)
            self._type_checking -= 1
            for child in node.orelse:
                self.visit(child)
        else:
            self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._add(node, alias.name)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level == 0 and node.module:  # relative imports stay inside the project
            names = (node.module, *(f"{node.module}.{a.name}" for a in node.names))
            self._add(node, node.module, names)

    def visit_Call(self, node: ast.Call) -> None:
        name = _dynamic_name(node)
        if name is not None:
            self._add(node, name)
        self.generic_visit(node)


def _all_imports() -> list[Import]:
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            visitor = _Imports(relative)
            visitor.visit(ast.parse(path.read_text(encoding="utf-8"), filename=relative))
            found += visitor.found
    return found


IMPORTS = _all_imports()


def _is_spark_engine(path: str) -> bool:
    return path.startswith("ledger/engines/spark/")


def test_the_scanner_sees_every_kind_of_import() -> None:
    source = """
import pyspark.sql as ps
from py4j import java_gateway
from typing import TYPE_CHECKING
import typing
if TYPE_CHECKING:
    from delta.tables import DeltaTable
if typing.TYPE_CHECKING:
    import duckdb
else:
    import duckdb
def f():
    import importlib
    importlib.import_module("pyspark.sql")
    __import__("delta")
    from . import spark
"""
    visitor = _Imports("x.py")
    visitor.visit(ast.parse(source))
    got = [(i.line, i.module, i.type_checking) for i in visitor.found]
    assert got == [
        (2, "pyspark", False),
        (3, "py4j", False),
        (4, "typing", False),
        (5, "typing", False),
        (7, "delta", True),
        (9, "duckdb", True),
        (11, "duckdb", False),
        (13, "importlib", False),
        (14, "pyspark", False),
        (15, "delta", False),
    ]


def test_only_the_spark_engine_imports_pyspark_py4j_or_delta() -> None:
    offending = [
        f"{i.path}:{i.line} imports {i.module}"
        + (" (under TYPE_CHECKING)" if i.type_checking else "")
        for i in IMPORTS
        if i.module in SPARK_MODULES and not _is_spark_engine(i.path)
    ]
    assert not offending, offending
    # The check is not vacuous: the engine itself does import them.
    assert {i.module for i in IMPORTS if _is_spark_engine(i.path)} >= {"pyspark", "delta"}


def test_only_the_duckdb_engine_imports_duckdb_at_run_time() -> None:
    offending = [
        f"{i.path}:{i.line} imports duckdb"
        for i in IMPORTS
        if i.module == "duckdb"
        and not i.type_checking
        and not i.path.startswith("ledger/engines/duckdb/")
        # The command line's `sql` is a DuckDB prompt over the tables: DuckDB is what it offers.
        and not i.path.startswith("ledger/cli/")
    ]
    assert not offending, offending
    assert any(
        i.module == "duckdb" and i.path.startswith("ledger/engines/duckdb/") for i in IMPORTS
    )


@pytest.mark.parametrize(
    "statement",
    [
        "import ledger, views, merge_policies",
        # Every module but the Spark engine, and ledger.spark (it loads the engine on first use).
        "import importlib, pkgutil, ledger, views, merge_policies\n"
        "for package in (ledger, views, merge_policies):\n"
        "    for info in pkgutil.walk_packages(package.__path__, package.__name__ + '.'):\n"
        "        if not info.name.startswith('ledger.engines.spark'):\n"
        "            importlib.import_module(info.name)\n"
        "import ledger.spark",
    ],
    ids=["packages", "every-module"],
)
def test_importing_the_packages_does_not_load_spark(statement: str) -> None:
    script = (
        f"{statement}\n"
        "import json, sys\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    loaded = set(json.loads(done.stdout.strip().splitlines()[-1]))
    assert "ledger" in loaded and "duckdb" in loaded  # the script did import the project
    assert not loaded & set(SPARK_MODULES), sorted(loaded & set(SPARK_MODULES))


_IMPORT_EACH_FIRST = """
import importlib, json, sys, traceback
failed = {}
for name in json.loads(sys.argv[1]):
    for loaded in [m for m in sys.modules if m.split(".")[0] in %r]:
        del sys.modules[loaded]
    try:
        importlib.import_module(name)
    except Exception:
        failed[name] = traceback.format_exc(limit=-3)
print(json.dumps(failed))
"""


def test_every_package_and_module_imports_first_in_a_fresh_interpreter() -> None:
    """Any module imported before all others loads: no import cycle through a package's
    ``__init__`` (``import merge_policies`` once failed on a half-loaded ``merge_policies``).
    One interpreter, the project's modules dropped from ``sys.modules`` before each import
    (third-party modules stay loaded, which keeps this fast)."""
    names = [*PACKAGES, *sorted(PROJECT_MODULES - set(PACKAGES))]
    done = subprocess.run(
        [sys.executable, "-c", _IMPORT_EACH_FIRST % (PACKAGES,), json.dumps(names)],
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    failed = json.loads(done.stdout.strip().splitlines()[-1])
    assert not failed, "\n".join(f"{name}:\n{error}" for name, error in failed.items())
    assert "ledger.engines.duckdb.rmw" in names and "merge_policies.base" in names


# --- the boundaries between the packages ------------------------------------------------------
#
# The library's moves are done: what is left here is by design, each entry with its reason
# (docs/concepts.md, "Module map", says the same).

# Nothing under ledger/ imports views: views build on ledger, never the other way round. The
# command line calls the reads views publish where they live (ledger.reads). Empty by design;
# an entry would name a front under ledger/ and the views modules it may import.
LEDGER_IMPORTING_VIEWS: dict[str, tuple[str, ...]] = {}

# The Spark front imports its engine inside each verb, so that importing ledger.spark does not
# load PySpark: (module path, the package whose modules it may import inside functions).
FUNCTION_IMPORTS_ALLOWED = {
    ("ledger/spark.py", "ledger.engines.spark"),
}

# No module outside merge_policies/ compares a policy's name (an empty allow-list).
POLICY_NAMES_ALLOWED: tuple[str, ...] = ()


def _allowed(path: str, prefixes: tuple[str, ...] | set[str]) -> bool:
    return any(path == p or (p.endswith("/") and path.startswith(p)) for p in prefixes)


def _module_of(path: str) -> str:
    parts = path.removesuffix(".py").split("/")
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


PROJECT_MODULES = {
    _module_of(path.relative_to(ROOT).as_posix())
    for package in PACKAGES
    for path in (ROOT / package).rglob("*.py")
}


def _views_import_allowed(i: Import) -> bool:
    return any(
        _allowed(i.path, {front})
        and all(any(n == m or n.startswith(m + ".") for m in modules) for n in i.names[:1])
        for front, modules in LEDGER_IMPORTING_VIEWS.items()
    )


def test_nothing_under_ledger_imports_views() -> None:
    offending = sorted(
        f"{i.path}:{i.line} imports {i.names[0]}"
        + (" (under TYPE_CHECKING)" if i.type_checking else "")
        for i in IMPORTS
        if i.module == "views" and i.path.startswith("ledger/") and not _views_import_allowed(i)
    )
    assert not offending, offending
    # Each allowed front does import views: an entry no longer needed must go.
    for front in LEDGER_IMPORTING_VIEWS:
        assert any(i.module == "views" and _allowed(i.path, {front}) for i in IMPORTS), front


def test_no_function_level_import_of_a_project_module() -> None:
    """A function-level import of the project hides a cycle; optional third-party packages
    (polars, pandas, deltalake, pyspark) are still imported on first use."""
    offending = sorted(
        f"{i.path}:{i.line} imports {i.names[0]} inside a function"
        for i in IMPORTS
        if i.in_function
        and i.module in PACKAGES
        and i.path.startswith(("ledger/", "views/"))
        and not any(
            i.path == path and (i.names[0] == package or i.names[0].startswith(package + "."))
            for path, package in FUNCTION_IMPORTS_ALLOWED
        )
    )
    assert not offending, offending


def _import_graph() -> dict[str, set[str]]:
    """Module -> the project modules it imports when it is imported (TYPE_CHECKING and
    function-level imports left out). A package's ``__init__`` is not an edge: importing any
    module of a package runs it first by design, and ledger's re-exports the public API."""
    graph: dict[str, set[str]] = {module: set() for module in PROJECT_MODULES}
    for i in IMPORTS:
        if i.type_checking or i.in_function or i.module not in PACKAGES:
            continue
        importer = _module_of(i.path)
        # ``from a.b import c``: the submodule a.b.c if there is one, else a.b itself.
        submodules = [n for n in i.names[1:] if n in PROJECT_MODULES]
        targets = submodules or [n for n in i.names[:1] if n in PROJECT_MODULES]
        graph[importer].update(t for t in targets if t != importer)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for target in sorted(graph.get(module, ())):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in on_stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return found


def test_the_cycle_finder_finds_cycles() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert _cycles(graph) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_the_project_modules_import_each_other_without_a_cycle() -> None:
    graph = _import_graph()
    assert graph["ledger.table"] >= {"ledger.log.handle", "ledger.rollup"}  # edges are seen
    assert not _cycles(graph), _cycles(graph)


def _policy_names() -> set[str]:
    """The built-in policy names: the keys of ``POLICY_MODULES`` in merge_policies."""
    tree = ast.parse((ROOT / "merge_policies" / "__init__.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "POLICY_MODULES" for t in node.targets)
            and isinstance(node.value, ast.Dict)
        ):
            return {k.value for k in node.value.keys if isinstance(k, ast.Constant)}
    raise AssertionError("merge_policies/__init__.py has no POLICY_MODULES dict")


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the docstring nodes of a module, its classes and functions."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def _policy_name_literals(source: str, names: set[str]) -> list[int]:
    tree = ast.parse(source)
    docstrings = _docstrings(tree)
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and node.value in names
        and id(node) not in docstrings
    ]


def test_the_policy_name_finder_skips_docstrings_and_text() -> None:
    source = '''
"""Module doc: "replacing"."""
def f(policy):
    """replacing"""
    message = f"the replacing policy {policy}"
    return policy.name == "replacing"
'''
    assert _policy_name_literals(source, {"replacing"}) == [6]


def test_no_policy_is_named_outside_merge_policies() -> None:
    """Code asks the policy its questions (merge_policies/base.py) instead of comparing its
    name: adding a policy is then one new module in merge_policies/."""
    names = _policy_names()
    assert {"collapsing", "replacing"} <= names
    offending = []
    for package in ("ledger", "views"):
        for path in sorted((ROOT / package).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            if _allowed(relative, POLICY_NAMES_ALLOWED):
                continue
            lines = _policy_name_literals(path.read_text(encoding="utf-8"), names)
            offending += [f"{relative}:{line}" for line in lines]
    assert not offending, offending
