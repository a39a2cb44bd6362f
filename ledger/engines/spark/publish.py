"""Delta Lake publishing with delta-spark: a ``ledger.publish.plan.PublishPlan`` (the
engine-neutral plan) applied as a full overwrite or one MERGE, recording the ledger version as the
commit's application transaction."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession

from ledger import errors
from ledger.engines.spark import jars
from ledger.engines.spark.convert import spark_schema
from ledger.errors import MissingDependencyError
from ledger.publish.plan import PublishPlan

# Session settings delta-spark reads for the next commit: the application transaction that makes
# a retried publish a no-op in Delta, and the commit's user metadata.
_TXN_APP_ID = "spark.databricks.delta.write.txnAppId"
_TXN_VERSION = "spark.databricks.delta.write.txnVersion"
_USER_METADATA = "spark.databricks.delta.commitInfo.userMetadata"
_DELTA_SPARK_FORBIDDEN = frozenset(" ,;{}()\n\t=")


def delta_available(spark: SparkSession) -> bool:
    """Whether delta-spark's Python package and its jars are both there."""
    try:
        import delta.tables  # noqa: F401
    except ImportError:
        return False
    return jars.on_classpath(spark, "io.delta.tables.DeltaTable")


def require_delta(spark: SparkSession) -> None:
    """Raise :class:`MissingDependencyError` naming what is missing unless delta-spark and its
    jars are there."""
    if not delta_available(spark):
        raise MissingDependencyError(
            "publishing on Spark needs delta-spark and the Delta Lake jars on the Spark "
            f"classpath: {jars.missing_message('delta')}, and start the session with "
            "ledger.engines.spark.jars.spark_options() (spark.jars); views.publish_delta "
            "publishes from the embedded engine without them"
        )


def delta_publish(spark: SparkSession, target: str, plan: PublishPlan) -> int:
    """Apply a :class:`PublishPlan` to the Delta table at ``target`` with delta-spark:
    a full overwrite or one MERGE, recording the ledger version as the commit's application
    transaction (``txnAppId``/``txnVersion``), so a retried publish is skipped by Delta too.
    Returns the Delta table's version afterwards."""
    require_delta(spark)
    from delta.tables import DeltaTable

    _check_delta_spark_names(plan.schema.names)
    commit_options = {
        _TXN_APP_ID: plan.app_id,
        _TXN_VERSION: str(plan.version),
        _USER_METADATA: json.dumps(plan.commit_metadata(), sort_keys=True),
    }
    if plan.new_columns:
        # The source's new columns, added (nullable) in a commit of their own that changes no
        # row, before the commit recording the version (which must not pick up these options).
        spark.sql(f"ALTER TABLE delta.{_spark_path(target)} ADD COLUMNS ({plan.new_columns_ddl()})")
    for name, value in commit_options.items():
        spark.conf.set(name, value)
    try:
        if plan.full:
            _delta_write(spark, plan.rows, target, "overwrite")
            return _delta_version(spark, target)
        before = _delta_version(spark, target)
        source = _frame(spark, plan.merge_source())
        # delta-spark's hints take Columns as well as SQL text: the plan gives text.
        values: dict[str, str | Column] = {**plan.insert_values("spark", "s")}
        (
            DeltaTable.forPath(spark, target)
            .alias("t")
            .merge(source.alias("s"), plan.merge_condition("spark", "t", "s"))
            .whenMatchedDelete()
            .whenNotMatchedInsert(
                condition=plan.insert_condition("spark", "s"),
                values=values,
            )
            .execute()
        )
        if _delta_version(spark, target) == before:
            # A merge that changes no row commits nothing (e.g. only ledger merges since the
            # last publish): record the version in an empty append instead.
            _delta_write(spark, plan.rows.slice(0, 0), target, "append")
        return _delta_version(spark, target)
    finally:
        for name in commit_options:  # session settings: they would apply to later writes
            spark.conf.unset(name)


def _check_delta_spark_names(names: Sequence[str]) -> None:
    # delta-spark refuses these characters in column names of a table without column mapping
    # (deltalake writes them): refuse before anything is written, saying what to do.
    for name in names:
        found = sorted(set(name) & _DELTA_SPARK_FORBIDDEN)
        if found:
            raise errors.SchemaError(
                f"column {name!r} holds {found!r}, which delta-spark does not write into a Delta "
                f"table (it refuses any of {''.join(sorted(_DELTA_SPARK_FORBIDDEN))!r}); publish "
                "this table with views.publish_delta (deltalake writes such names), or rename "
                "the column"
            )


def _delta_write(spark: SparkSession, rows: pa.Table, target: str, mode: str) -> None:
    writer = _frame(spark, rows).write.format("delta").mode(mode)
    if mode == "overwrite":
        writer = writer.option("overwriteSchema", "true")
    writer.save(target)


def _frame(spark: SparkSession, rows: pa.Table) -> DataFrame:
    """``rows`` as a DataFrame with the Spark types of their Arrow schema (also when empty)."""
    return spark.createDataFrame(rows, schema=spark_schema(rows.schema))


def _spark_path(target: str) -> str:
    """A Delta table's path as Spark SQL's quoted identifier (backticks, inner ones doubled)."""
    return "`" + target.replace("`", "``") + "`"


def _delta_version(spark: SparkSession, target: str) -> int:
    from delta.tables import DeltaTable

    latest = DeltaTable.forPath(spark, target).history(1).select("version").first()
    assert latest is not None  # a Delta table has at least its creating commit
    return int(latest[0])
