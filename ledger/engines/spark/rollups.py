"""A rollup's group deltas computed on Spark: the sign-weighted measures of a change set's
entries (or, for a rebuild, of every entry minus what the rollup holds), summed per group."""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa
from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F

from ledger.engines.spark.convert import col, spark_schema
from ledger.engines.spark.scan import scan_files, signed_entries
from ledger.engines.spark.session import session as spark_session
from ledger.engines.spark.session import to_arrow
from ledger.rollup import DeltaRequest
from ledger.schema import DML_TYPE
from ledger.writer import file_schema


def deltas_on(spark: SparkSession | None) -> Callable[[DeltaRequest], pa.Table]:
    """The rollup delta function (``Rollup.retrying``'s ``deltas``) running on ``spark`` (or
    the session ``ledger.spark`` would use)."""

    def deltas(request: DeltaRequest) -> pa.Table:
        session = spark_session(spark)
        base = request.rollup.base
        state = request.base_state
        schema = file_schema(state.schema, state.config)
        if request.changes is None:
            entries = scan_files(session, base.store, base.prefix, list(state.alive_files), schema)
        else:
            found = request.changes
            added = [*found.written, *(m for c in found.replaced for m in c.added)]
            removed = [m for c in found.replaced for m in c.removed]
            entries = signed_entries(session, base.store, base.prefix, added, removed, schema)
        definition = request.rollup.definition
        dml = col(DML_TYPE)
        weighted = []
        for measure in definition.measures:
            if measure.function == "count" and measure.column is None:
                value = dml
            elif measure.function == "count":
                value = F.when(col(measure.column or "").isNull(), 0).otherwise(dml)
            else:
                value = dml * col(measure.column or "")
            weighted.append(value.alias(measure.name))
        by = list(definition.by)
        parts = [entries.select(*map(col, by), *weighted)]
        if request.rebuild:
            table = request.rollup.table
            held_schema = file_schema(request.rollup_state.schema, request.rollup_state.config)
            held = scan_files(
                session,
                table.store,
                table.prefix,
                list(request.rollup_state.alive_files),
                held_schema,
            )
            parts.append(
                held.select(
                    *map(col, by),
                    *((-(dml * col(m.name))).alias(m.name) for m in definition.measures),
                )
            )
        union = parts[0]
        for part in parts[1:]:
            union = union.unionByName(part)
        types = request.rollup_state.schema
        target = spark_schema(types.arrow())
        summed = union.groupBy(*map(col, by)).agg(
            *(
                F.coalesce(F.sum(col(m.name)), F.lit(0)).cast(target[m.name].dataType).alias(m.name)
                for m in definition.measures
            )
        )
        changed: Column | None = None
        for m in definition.measures:
            term = col(m.name) != 0
            changed = term if changed is None else changed | term
        out: pa.Table = to_arrow(summed if changed is None else summed.filter(changed))
        return out

    return deltas
