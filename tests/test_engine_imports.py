"""Engines stay behind their modules (docs: ``ledger/engines/`` is the only place that imports an
engine).

- ``pyspark``, ``py4j`` and delta-spark's ``delta`` are imported only by
  ``ledger/engines/spark*.py`` (anywhere in a module: top level, inside functions, under
  ``TYPE_CHECKING``, or by ``importlib.import_module``/``__import__`` with a literal name).
- ``duckdb`` is imported at run time only by ``ledger/engines/duckdb/``. Other modules import it
  under ``TYPE_CHECKING`` for their type hints (``ledger/table.py``, ``ledger/snapshot.py``,
  ``views/reading.py``, ``views/catalog.py``, ``views/publish.py`` today); that never runs, so
  it is allowed.
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

    def _add(self, node: ast.AST, module: str) -> None:
        top = module.split(".")[0]
        line = getattr(node, "lineno", 0)
        self.found.append(Import(self.path, line, top, self._type_checking > 0))

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
            self._add(node, node.module)

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
    name = path.rsplit("/", 1)[-1]
    return path.startswith("ledger/engines/") and name.startswith("spark") and path.count("/") == 2


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
