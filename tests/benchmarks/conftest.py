"""Benchmark plumbing: every test records its figures here; the session prints one JSON document.

Benchmarks never assert on speed (the machine is shared); they assert that what they measured is
correct (row counts, versions), so a fast wrong answer cannot pass for a fast right one.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

_RESULTS: dict[str, Any] = {}


@pytest.fixture(scope="session")
def bench_results() -> dict[str, Any]:
    """The figures of the whole run, keyed by benchmark name; printed as JSON at the end."""
    return _RESULTS


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _RESULTS:
        return
    terminalreporter.write_sep("=", "ledger-tables benchmark figures (JSON)")
    # One benchmark per line: short enough to read, still one valid JSON document.
    lines = [f"  {json.dumps(name)}: {json.dumps(figures)}" for name, figures in _RESULTS.items()]
    terminalreporter.write_line("{\n" + ",\n".join(lines) + "\n}")


ICEBERG_EXTENSIONS = "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The benchmarks' one Spark session: the tests' session (tests/conftest.py) plus, where
    `make jars-iceberg` fetched them, Iceberg's SQL extensions and a Hadoop catalog ``peers``
    in a scratch folder, so the Spark peers run side by side with Delta and the ledger."""
    from ledger import jvm
    from tests import conftest

    extra: dict[str, str] = {}
    if jvm.group_jars("iceberg"):
        options = jvm.spark_options(["delta", "s3a", "iceberg"])
        extensions = [options.get("spark.sql.extensions", ""), ICEBERG_EXTENSIONS]
        extra = {
            **options,
            "spark.sql.extensions": ",".join(e for e in extensions if e),
            "spark.sql.catalog.peers": "org.apache.iceberg.spark.SparkCatalog",
            "spark.sql.catalog.peers.type": "hadoop",
            "spark.sql.catalog.peers.warehouse": str(tmp_path_factory.mktemp("iceberg")),
        }
    yield from conftest.spark_session(extra)
