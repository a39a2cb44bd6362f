"""A rollup's group deltas computed on Spark: the sign-weighted measures of a change set's
entries (or, for a rebuild, of every entry minus what the rollup holds), summed per group by the
Spark rendering of the query the embedded refresh runs (``ledger.sql.rollups``)."""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa
from pyspark.sql import SparkSession

from ledger.engines.spark.query import bind_relations, run
from ledger.engines.spark.scan import scan_files, signed_entries
from ledger.engines.spark.session import session as spark_session
from ledger.engines.spark.session import to_arrow
from ledger.rollup import DeltaRequest
from ledger.sql.dialects import DIALECTS
from ledger.sql.rollups import group_deltas
from ledger.sql.trees import render
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
        held = None
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
        names = bind_relations({"changes": entries, **({"held": held} if held is not None else {})})
        definition = request.rollup.definition
        query = group_deltas(
            definition.by,
            definition.measures,
            request.rollup_state.schema.to_json(),
            names["changes"],
            names.get("held"),
        )
        out: pa.Table = to_arrow(run(session, render(query, DIALECTS["spark"])))
        return out

    return deltas
