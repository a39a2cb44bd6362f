"""Fixtures shared by every suite: a warehouse on each backend (local disk and S3 over HTTP)."""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

import ledger
from tests.support.engines import DuckDBEngine, Engine, SparkEngine
from tests.support.request_counting import CountingS3Server
from tests.support.s3server import BUCKET, MotoServer, S3Endpoint
from tests.support.spark_worker import SparkOnOneWorker, uses_spark

settings.register_profile(
    "ci",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    print_blob=True,
)
# `make test-deep` (HYPOTHESIS_PROFILE=deep, or pytest --hypothesis-profile=deep): every property
# suite at hundreds of examples. Suites that fix their own count scale it with `examples(n)`.
DEEP_EXAMPLES = 300
settings.register_profile("deep", settings.get_profile("ci"), max_examples=DEEP_EXAMPLES)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def examples(n: int) -> int:
    """``n`` examples in the everyday run; at least DEEP_EXAMPLES under the deep profile (kept
    fast by default, exhaustive on demand). Read when a test module is collected, after the
    profile is chosen."""
    deep = settings.default.max_examples >= DEEP_EXAMPLES
    return max(n, DEEP_EXAMPLES) if deep else n


# Races on tables whose transaction timeout is a second or two: their merges and transactions
# must finish inside it, so they run with the machine to themselves (`make test` runs them after
# its two-worker pytest-xdist run), never beside another worker.
RUN_ALONE = {
    "test_concurrency.py",
    "test_maintenance_concurrency.py",
    "test_vacuum_running_work.py",
}


@pytest.hookimpl(tryfirst=True)  # before -m selects on the mark added here
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        # Their Spark cases race no timeout, and a Spark session of its own would cost the
        # alone run a JVM start: they run beside the others (marked or asking for the session).
        if item.path.name in RUN_ALONE and not uses_spark(item):
            item.add_marker(pytest.mark.alone)


def pytest_configure(config: pytest.Config) -> None:
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(SparkOnOneWorker(), "ledger-spark-on-one-worker")
    config.addinivalue_line(
        "markers",
        "engines: also run this test on Spark through the `engine` fixture (DuckDB runs every "
        "test that takes `engine`; Spark only the ones that exercise engine code)",
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """The engine axis: every test taking ``engine`` runs on DuckDB; those marked
    ``@pytest.mark.engines`` on Spark as well (marked ``spark``, so ``-m "not spark"`` skips
    them)."""
    if "engine" not in metafunc.fixturenames:
        return
    params = [pytest.param("duckdb", id="duckdb")]
    if metafunc.definition.get_closest_marker("engines") is not None:
        params.append(pytest.param("spark", id="spark", marks=pytest.mark.spark))
    metafunc.parametrize("engine", params, indirect=True)


class _PathsOnce(list[str]):
    """A loader's search paths, each kept once: boto3 adds its own folder to the loader of every
    session it opens, which is one shared loader here."""

    def append(self, path: str) -> None:
        if path not in self:
            super().append(path)


@pytest.fixture(scope="session", autouse=True)
def _botocore_models_parsed_once() -> Iterator[None]:
    """Every botocore session of the run shares one data loader per search path.

    A store opens a boto3 session per client, and each session's loader reads and parses
    botocore's JSON models anew: about 0.2 s of CPU per client, 4.8 s of the 16 s of CPU that
    test_delete_marks.py's 13 S3 cases took (24 clients). The models are read-only data, and one
    loader serves every client of one session in the product too: what a client is and does is
    unchanged. The benchmarks (tests/benchmarks/conftest.py) leave it out, so an S3 client
    there costs what it costs in the product.
    """
    import botocore.loaders
    import botocore.session

    loaders: dict[str | None, botocore.loaders.Loader] = {}
    create = botocore.session.create_loader

    def shared(search_path_string: str | None = None) -> botocore.loaders.Loader:
        if search_path_string not in loaders:
            loader = create(search_path_string)
            loader._search_paths = _PathsOnce(loader.search_paths)
            loaders[search_path_string] = loader
        return loaders[search_path_string]

    botocore.session.create_loader = shared
    yield
    botocore.session.create_loader = create


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[S3Endpoint]:
    server = MotoServer()
    endpoint = server.start()
    yield endpoint
    server.stop()


@dataclass(frozen=True)
class Location:
    """Where a test's warehouse lives: enough to open it again from another process."""

    backend: str
    uri: str
    options: dict[str, Any] = field(default_factory=dict)

    def connect(self) -> ledger.Warehouse:
        return ledger.connect(self.uri, **self.options)


@pytest.fixture(params=["local", "s3"])
def location(request: pytest.FixtureRequest, tmp_path: Any) -> Location:
    """A fresh, empty warehouse location on each backend."""
    if request.param == "local":
        return Location("local", str(tmp_path / "warehouse"))
    endpoint: S3Endpoint = request.getfixturevalue("s3_endpoint")
    return Location("s3", f"s3://{BUCKET}/{uuid.uuid4().hex}", endpoint.options())


@pytest.fixture
def s3_location(s3_endpoint: S3Endpoint) -> Location:
    """A fresh, empty warehouse location on S3 only."""
    return Location("s3", f"s3://{BUCKET}/{uuid.uuid4().hex}", s3_endpoint.options())


@pytest.fixture(scope="module")
def counting_server() -> Iterator[CountingS3Server]:
    """A moto server of its own that records every request (tests/support/request_counting.py):
    how tests and benchmarks count the requests a commit makes."""
    server = CountingS3Server()
    server.start()
    yield server
    server.stop()


@pytest.fixture
def local_location(tmp_path: Any) -> Location:
    return Location("local", str(tmp_path / "warehouse"))


@pytest.fixture
def warehouse(location: Location) -> ledger.Warehouse:
    return location.connect()


@pytest.fixture
def engine(request: pytest.FixtureRequest) -> Engine:
    """The engine a behaviour test writes, reads and merges through (tests/support/engines.py):
    the embedded DuckDB engine, or Spark through ``ledger.spark`` with DataFrames."""
    if request.param == "spark":
        return SparkEngine(request.getfixturevalue("spark"))
    return DuckDBEngine()


@pytest.fixture(autouse=True)
def _no_aws_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    # Tests never talk to real AWS: credentials come from the fixture, never the environment.
    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """The one local Spark session of the whole run: UI off, two shuffle partitions, driver and
    workers on this interpreter, bound to 127.0.0.1, computing in UTC, with the Delta Lake and
    S3A jars `make jars` and `make jars-s3a` fetched on its classpath."""
    yield from spark_session(TEST_JVM_OPTIONS)


# The tests' JVM: its many small queries run mostly code the JVM has not compiled yet, which the
# quick first compiler alone serves best (about a third less CPU over the Spark tests than with
# the optimising second compiler too), and tiny tables need no parallel collector. How Spark
# computes is unchanged; the benchmarks (tests/benchmarks) start their session without these.
TEST_JVM_OPTIONS = {
    "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
}


def spark_session(extra: dict[str, str] | None = None) -> Iterator[Any]:
    """Start the run's Spark session (with ``extra`` options on top), yield it, stop it."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    from pyspark.sql import SparkSession

    from ledger.engines.spark import jars

    builder = SparkSession.builder
    # `make jars` and `make jars-s3a`: Delta and S3A tests skip without them.
    options = {**jars.spark_options(["delta", "s3a"]), **(extra or {})}
    for name, value in options.items():
        builder = builder.config(name, value)
    session = (
        builder.master("local[2]")
        .appName("ledger-tables-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "2g")
        # Delta rebuilds a table's state from its log in 50 partitions unless told otherwise:
        # 50 tasks on two cores for every read of a tiny test table's snapshot.
        .config("spark.databricks.delta.snapshotPartitions", "2")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
