"""The Spark engine (PySpark): the same ledger tables read and written on a cluster.

The public API is ``ledger.spark``; these modules are its engine, with the module names of the
DuckDB engine (``ledger/engines/duckdb/``) where the role is the same:

- ``session``: the Spark session and the Arrow batch size of its Python tasks;
- ``scan``: data files -> a DataFrame of raw entries (Spark's Parquet reader, or pyarrow on
  the executors), built from the log's file list, never a directory listing;
- ``query``: generated SQL run over DataFrames bound as temporary views;
- ``reads``: the views (visible, totals, history, changes) as DataFrames;
- ``convert``: incoming DataFrames checked and cast to the table's types as the embedded
  engine converts them, and shaped by the table's insert transform;
- ``write``: entries -> files written by the executors (the shared writer inside
  ``mapInArrow``), which send back only their file markers;
- ``rmw``: read-modify-write (upsert, update, delete): the live entries of given keys;
- ``rewrite``: merges, each key range run through the table's merge policy on the executors;
- ``changes``: the change entries between versions;
- ``rollups``: a rollup's group deltas;
- ``streaming``: the Structured Streaming sink;
- ``publish``: Delta Lake publishing with delta-spark;
- ``errors``: executor errors back as ledger errors;
- ``engine``: the engine contract (``ledger.engines.base.Engine``) over these modules;
- ``jars`` and ``s3a``: the JVM jars on the classpath and Hadoop's S3A settings.
"""

from __future__ import annotations

from importlib.util import find_spec

from ledger.errors import MissingDependencyError

# Checked without importing PySpark: listing this package's modules must not start a JVM
# client, and each module imports what it uses.
if find_spec("pyspark") is None:  # pragma: no cover - exercised only without the extra
    raise MissingDependencyError(
        "the Spark engine needs PySpark: pip install 'ledger-tables[spark]'"
    )
