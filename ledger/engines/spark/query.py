"""Generated SQL (the Spark dialect of the queries every engine shares) run over DataFrames
bound as temporary views of their session."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from pyspark.sql import DataFrame, SparkSession

VIEW_PREFIX = "__ledger_"  # temporary views never collide with a table's own views


def bind_relations(frames: Mapping[str, DataFrame]) -> dict[str, str]:
    """Each DataFrame as a temporary view of its session under a fresh name; returns the names
    by key, for the generated SQL to read.

    >>> names = bind_relations({"entries": frame})                      # doctest: +SKIP
    >>> run(spark, f"SELECT count(*) FROM {names['entries']}")         # doctest: +SKIP
    """
    tag = uuid.uuid4().hex[:12]
    names = {}
    for part, frame in frames.items():
        name = f"{VIEW_PREFIX}{part}_{tag}"
        frame.createOrReplaceTempView(name)
        names[part] = name
    return names


def arrow_frame(session: SparkSession, rows: Any) -> DataFrame:
    """Driver-side Arrow rows (a few keys, a commit list) as a DataFrame."""
    frame: DataFrame = session.createDataFrame(rows)
    return frame


def run(session: SparkSession, text: str) -> DataFrame:
    """The DataFrame of a Spark SQL query over bound relations."""
    frame: DataFrame = session.sql(text)
    return frame
