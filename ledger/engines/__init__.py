"""Engines: the only modules that import an execution engine (duckdb, pyspark).

Each engine is a package with the same module names (see :mod:`ledger.engines.base` for the
contract); :func:`engine_named` picks one by name and imports it only then, so a missing
optional engine costs nothing until it is asked for.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ledger.errors import InvalidArgumentError, MissingDependencyError

if TYPE_CHECKING:
    from ledger.engines.base import Engine

# Engine name -> (module holding its ENGINE object, the extra that installs what it needs).
ENGINES: dict[str, tuple[str, str | None]] = {
    "duckdb": ("ledger.engines.duckdb", None),
    # In a module of its own: the package's other modules load without the whole engine.
    "spark": ("ledger.engines.spark.engine", "spark"),
}


def engine_named(name: str) -> Engine[Any, Any]:
    """The engine called ``name`` (a key of :data:`ENGINES`), imported on first use.

    >>> engine_named("duckdb").name
    'duckdb'
    """
    try:
        module, extra = ENGINES[name]
    except KeyError:
        raise InvalidArgumentError(
            f"unknown engine {name!r}: use one of {', '.join(map(repr, sorted(ENGINES)))}"
        ) from None
    try:
        loaded = importlib.import_module(module)
    except ImportError as e:
        if extra is None:
            raise
        raise MissingDependencyError(
            f"the {name} engine needs {e.name or 'a package'} that is not installed: "
            f"pip install 'ledger-tables[{extra}]'"
        ) from e
    engine: Engine[Any, Any] = loaded.ENGINE
    return engine
