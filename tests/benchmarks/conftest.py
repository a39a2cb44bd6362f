"""Benchmark plumbing: every test records its figures here; the session prints one JSON document
and, when ``LEDGER_BENCH_REPORT`` names a folder (``make bench``: docs/), writes the report there
(benchmarks.md, benchmarks.json and a chart; see tests/benchmarks/report.py for what a figure is).

Benchmarks never assert on speed (the machine is shared); they assert that what they measured is
correct (row counts, versions), so a fast wrong answer cannot pass for a fast right one.

The S3 benchmarks talk to moto's server running in a process of its own
(tests/support/s3process.py), as a real S3 never shares its client's process: served from a
thread of the benchmark's process, moto's few milliseconds of Python per request would share our
GIL and be counted as the product's time. ``LEDGER_BENCH_S3_SERVER=thread`` brings back the
in-process server of the tests (to compare the two).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import pytest

from tests.benchmarks.report import write_requested_report
from tests.support.request_counting import CountingS3Server
from tests.support.s3process import CountingS3Process, MotoProcess
from tests.support.s3server import MotoServer, S3Endpoint

_RESULTS: dict[str, Any] = {}


@pytest.fixture(scope="session", autouse=True)
def _botocore_models_parsed_once() -> None:
    """The tests' shared botocore loader (tests/conftest.py) is left out: an S3 client of a
    benchmark reads its models as the product's clients do."""


@pytest.fixture(scope="session")
def bench_results() -> dict[str, Any]:
    """The figures of the whole run, keyed by benchmark name; printed as JSON at the end."""
    return _RESULTS


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _RESULTS:
        return
    written = write_requested_report(_RESULTS)
    if written:
        terminalreporter.write_line("benchmark report: " + ", ".join(map(str, written)))
    terminalreporter.write_sep("=", "ledger-tables benchmark figures (JSON)")
    # One benchmark per line: short enough to read, still one valid JSON document.
    lines = [f"  {json.dumps(name)}: {json.dumps(figures)}" for name, figures in _RESULTS.items()]
    terminalreporter.write_line("{\n" + ",\n".join(lines) + "\n}")


def _moto_in_process() -> bool:
    """Whether ``LEDGER_BENCH_S3_SERVER`` asks for moto in a thread of this process."""
    mode = os.environ.get("LEDGER_BENCH_S3_SERVER", "process").strip() or "process"
    if mode not in ("process", "thread"):
        raise pytest.UsageError(f"LEDGER_BENCH_S3_SERVER={mode!r}: use 'process' or 'thread'")
    return mode == "thread"


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[S3Endpoint]:
    """The benchmarks' S3 endpoint: moto in a process of its own (see the module docstring)."""
    server = MotoServer() if _moto_in_process() else MotoProcess()
    endpoint = server.start()
    yield endpoint
    server.stop()


@pytest.fixture(scope="module")
def counting_server() -> Iterator[CountingS3Server | CountingS3Process]:
    """A moto server of its own that records every request, in a process of its own unless
    ``LEDGER_BENCH_S3_SERVER=thread``; ``taken()`` hands over the requests since the last call."""
    server = CountingS3Server() if _moto_in_process() else CountingS3Process()
    server.start()
    yield server
    server.stop()


ICEBERG_EXTENSIONS = "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"


def iceberg_runtime_problem() -> str | None:
    """Why the fetched Iceberg runtime cannot join the session, or None. A runtime is built for
    one Spark minor version; on another its catalog fails to load, so its extension and catalog
    are left out of the session rather than loaded half-working."""
    import re

    import pyspark

    from ledger.engines.spark import jars as jvm

    jars = jvm.group_jars("iceberg")
    if not jars:
        return jvm.missing_message("iceberg")
    spark_minor = ".".join(pyspark.__version__.split(".")[:2])
    built_for = {m.group(1) for j in jars if (m := re.search(r"runtime-(\d+\.\d+)_", j.name))}
    if spark_minor not in built_for:
        return (
            f"{', '.join(j.name for j in jars)} is built for Spark {', '.join(sorted(built_for))}, "
            f"not {spark_minor}, and no Iceberg runtime for Spark {spark_minor} is published; on "
            f"Spark {spark_minor} its catalog fails to load (IncompatibleClassChangeError: "
            "SparkView can not implement org.apache.spark.sql.connector.catalog.View)"
        )
    return None


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The benchmarks' one Spark session: the tests' session (tests/conftest.py) plus, where
    `make jars-iceberg` fetched them, Iceberg's SQL extensions and a Hadoop catalog ``peers``
    in a scratch folder, so the Spark peers run side by side with Delta and the ledger."""
    from ledger.engines.spark import jars as jvm
    from tests import conftest

    extra: dict[str, str] = {}
    if iceberg_runtime_problem() is None:
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
