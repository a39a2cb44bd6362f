"""The visible view as a tree: the latest visible row of every key (docs/views.md says what
each kind of policy shows)."""

from __future__ import annotations

import pyarrow as pa
from sqlglot import exp

from ledger.sql.dialects import Dialect
from ledger.sql.live import latest_live_rows, latest_version_rows, live_entries
from ledger.sql.names import (
    CROWDED,
    CROWDED_ENTRIES,
    DEDUPED,
    DELETED,
    ENTRIES_OF_KEY,
    KEYED,
    LATEST_INSERTIONS,
    LATEST_ORDER,
    LIVE,
    MARKS,
    ORDER,
    ORDER_SHIFT,
    TRX_ID,
    TRX_SEQ,
    UNSURE,
)
from ledger.sql.spec import TableSpec
from ledger.sql.trees import (
    Sources,
    alias,
    col,
    cols,
    descending,
    dml,
    entry_order,
    first_per,
    is_insertion,
    number,
    relation,
    using,
    weighted_by_sign,
    with_ctes,
)
from merge_policies.base import AGGREGATED, LATEST_VERSION


def visible(
    spec: TableSpec, dialect: Dialect, sources: Sources, *, system_columns: bool = False
) -> exp.Query:
    """The latest visible row of every key (see docs/views.md for each policy's meaning)."""
    ctes: list[tuple[str, exp.Query]] = []
    kind = spec.policy.visible_rows
    if kind == AGGREGATED:
        return aggregated_rows(spec, sources.entries)
    if kind == LATEST_VERSION:
        query: exp.Query = latest_version_rows(
            relation(sources.entries),
            spec.key_columns,
            shown_columns(spec, system_columns),
            latest_first(spec),
        )
    elif sources.lonely_older and spec.policy.repeat_columns(spec.key_columns) is None:
        query = _live_rows_after_lonely(spec, dialect, sources, system_columns, ctes)
    elif sources.lonely is not None:
        query = _live_rows_beside_lonely(spec, dialect, sources, system_columns, ctes)
    else:
        entries = deduplicated(spec, sources.entries, ctes)
        if sources.every_entry_grouped:
            live = live_entries(spec.value_columns, _floats(spec), dialect)
            query = _latest_of_live(spec, live.from_(relation(entries)), system_columns, ctes)
        else:
            query = _live_rows(spec, dialect, entries, system_columns, ctes)
    if sources.isolated is not None:
        shown = shown_columns(spec, system_columns)
        as_they_are = exp.select(*cols(shown)).from_(relation(sources.isolated))
        query = exp.union(as_they_are, query, distinct=False)
    return with_ctes(query, ctes)


def shown_columns(spec: TableSpec, system_columns: bool) -> list[str]:
    """The columns of a visible row: user columns, or with ``system_columns`` the values
    (``_row_id`` included) and ``trx_id``, ``trx_seq``."""
    if not system_columns:
        return list(spec.columns)
    return [*spec.value_columns, TRX_ID, TRX_SEQ]


def latest_first(spec: TableSpec) -> list[exp.Ordered]:
    """The order putting each key's latest entry first."""
    return descending(spec.policy.latest_order() or [TRX_ID, TRX_SEQ])


def deduplicated(spec: TableSpec, entries: str, ctes: list[tuple[str, exp.Query]]) -> str:
    """The relation of ``entries`` without repeats, where the policy keeps one entry of
    repeated ones (the earliest): a common table expression added to ``ctes``."""
    repeat = spec.policy.repeat_columns(spec.key_columns)
    if repeat is None:
        return entries
    order = [
        exp.Ordered(this=col(TRX_ID), nulls_first=False),
        exp.Ordered(this=col(TRX_SEQ), nulls_first=False),
    ]
    ctes.append((DEDUPED, first_per(exp.select("*").from_(relation(entries)), repeat, order)))
    return DEDUPED


def _live_rows(
    spec: TableSpec,
    dialect: Dialect,
    entries_name: str,
    system_columns: bool,
    ctes: list[tuple[str, exp.Query]],
) -> exp.Query:
    """Signed semantics. Keys with a single entry are visible when it is an insertion; the
    entries of crowded keys (more than one entry) cancel per value tuple by sign, and the live
    tuple inserted last is the key's row (ledger.sql.live explains why per tuple)."""
    entries = relation(entries_name)
    keys = list(spec.key_columns)
    values = list(spec.value_columns)
    shown = shown_columns(spec, system_columns)
    if dialect.crowded_by_window:
        count = exp.Window(this=exp.Count(this=exp.Star()), partition_by=cols(keys))
        keyed = exp.select("*", alias(count, ENTRIES_OF_KEY)).from_(entries.copy())
        ctes.append((KEYED, keyed))
        alone = exp.EQ(this=col(ENTRIES_OF_KEY), expression=number(1))
        singles = (
            exp.select(*cols(shown)).from_(relation(KEYED)).where(exp.and_(alone, is_insertion()))
        )
        crowded_entries = (
            exp.select("*")
            .from_(relation(KEYED))
            .where(exp.GT(this=col(ENTRIES_OF_KEY), expression=number(1)))
        )
        live = live_entries(values, _floats(spec), dialect).from_(
            exp.paren(crowded_entries, copy=False)
        )
    else:
        crowded = (
            exp.select(*cols(keys))
            .from_(entries.copy())
            .group_by(*cols(keys))
            .having(exp.GT(this=exp.Count(this=exp.Star()), expression=number(1)))
        )
        ctes.append((CROWDED, crowded))
        singles = (
            exp.select(*cols(shown))
            .from_(entries.copy())
            .join(relation(CROWDED), using=using(keys), join_type="anti")
            .where(is_insertion())
        )
        live = (
            live_entries(values, _floats(spec), dialect)
            .from_(entries.copy())
            .join(relation(CROWDED), using=using(keys), join_type="semi")
        )
    return exp.union(singles, _latest_of_live(spec, live, system_columns, ctes), distinct=False)


def _live_rows_beside_lonely(
    spec: TableSpec,
    dialect: Dialect,
    sources: Sources,
    system_columns: bool,
    ctes: list[tuple[str, exp.Query]],
) -> exp.Query:
    """Signed semantics, as :func:`_live_rows`, with the lonely files apart (see
    :class:`~ledger.sql.trees.Sources`). A lonely file holds each of its keys once, so a key
    is crowded only through the other files' entries or another lonely file: the grouping
    that finds crowded keys reads the other files' keys and the lonely keys that also occur
    there (a semi-join, which only probes), never every lonely entry. Keys with NULL parts
    never match a join, so they are alone here as in :func:`_live_rows`. Repeats (dedup) are
    dropped among the crowded keys' entries only: a key with a repeat has two entries, so it
    is crowded, and a crowded key's entries all go through the cancellation."""
    assert sources.lonely is not None
    entries_name = sources.entries
    keys = list(spec.key_columns)
    shown = shown_columns(spec, system_columns)
    lonely = relation(sources.lonely)
    other_keys = exp.select(*cols(keys)).from_(relation(entries_name))
    shared_keys = (
        exp.select(*cols(keys))
        .from_(lonely.copy())
        .join(exp.paren(other_keys.copy(), copy=False), using=using(keys), join_type="semi")
    )
    counted = exp.union(other_keys, shared_keys, distinct=False)
    crowded: exp.Query = (
        exp.select(*cols(keys))
        .from_(exp.paren(counted, copy=False))
        .group_by(*cols(keys))
        .having(exp.GT(this=exp.Count(this=exp.Star()), expression=number(1)))
    )
    if sources.repeated_keys is not None:
        repeated = exp.select(*cols(keys)).from_(relation(sources.repeated_keys))
        crowded = exp.union(crowded, repeated, distinct=False)
    ctes.append((CROWDED, crowded))

    def split(source: str, join_type: str) -> exp.Select:
        return (
            exp.select("*")
            .from_(relation(source))
            .join(relation(CROWDED), using=using(keys), join_type=join_type)
        )

    singles = exp.union(
        exp.select(*cols(shown))
        .from_(exp.paren(split(entries_name, "anti"), copy=False))
        .where(is_insertion()),
        exp.select(*cols(shown)).from_(exp.paren(split(sources.lonely, "anti"), copy=False)),
        distinct=False,
    )
    both = exp.union(split(entries_name, "semi"), split(sources.lonely, "semi"), distinct=False)
    ctes.append((CROWDED_ENTRIES, both))
    crowded_entries = deduplicated(spec, CROWDED_ENTRIES, ctes)
    live = live_entries(list(spec.value_columns), _floats(spec), dialect).from_(
        relation(crowded_entries)
    )
    return exp.union(singles, _latest_of_live(spec, live, system_columns, ctes), distinct=False)


def _live_rows_after_lonely(
    spec: TableSpec,
    dialect: Dialect,
    sources: Sources,
    system_columns: bool,
    ctes: list[tuple[str, exp.Query]],
) -> exp.Query:
    """Signed semantics, as :func:`_live_rows`, when every lonely entry is older than every
    entry of ``sources.entries`` (the files holding marks, and lonely files written after
    them) and no repeat is dropped.

    A key's visible row is its latest insertion whenever that insertion's value tuple is live,
    and it is live whenever no delete mark of the key carries the same values (its sign sum is
    then at least its own +1). The latest insertion of a key found in ``entries`` is there,
    since lonely entries are older; so each key of ``entries`` is settled by its latest
    insertion there and its marks there (lonely files hold none), without reading its lonely
    entry or grouping by value tuple. Only the *unsure* keys (a mark equal to the latest
    insertion, keys repeated across lonely files) go through the
    per-tuple cancellation, with their lonely entries. With ``sources.inserted_once`` each
    key's only insertion in ``entries`` is its latest, taken without grouping by key (keys
    with NULL parts left to the rows read as they are). The marks are compared with ``IS NOT
    DISTINCT FROM``, which finds at least every tuple the cancellation groups together
    (``-0.0`` meets ``0.0``, NaN meets NaN): a key taken as unsure needlessly only costs time.
    Keys with marks but no insertion in ``entries`` (deletes of older rows) are settled by
    their lonely row and those marks (:func:`_lonely_rows_left_by_marks`), in the same read of
    the lonely files.
    Keys with NULL parts never match a join, so their insertions are visible as they are, as
    in :func:`_live_rows`."""
    assert sources.lonely is not None
    keys = list(spec.key_columns)
    shown = shown_columns(spec, system_columns)
    entries = relation(sources.entries)
    order = alias(entry_order(dialect), ORDER)
    insertions = exp.select("*", order).from_(entries.copy()).where(is_insertion())
    null_keys = exp.or_(*(exp.Is(this=col(k), expression=exp.Null()) for k in keys))
    latest: exp.Select
    if sources.inserted_once:  # each key's insertion is its latest: no grouping needed
        latest = insertions.where(exp.not_(exp.paren(null_keys.copy(), copy=False)))
    else:
        latest_order = (
            exp.select(*cols(keys), alias(exp.Max(this=entry_order(dialect)), ORDER))
            .from_(entries.copy())
            .where(is_insertion())
            .group_by(*cols(keys))
        )
        ctes.append((LATEST_ORDER, latest_order))
        latest = (
            exp.select("*")
            .from_(exp.paren(insertions, copy=False))
            .join(relation(LATEST_ORDER), using=using([*keys, ORDER]), join_type="semi")
        )
    ctes.append((LATEST_INSERTIONS, latest))
    marks = exp.select("*").from_(entries.copy()).where(exp.EQ(this=dml(), expression=number(-1)))
    ctes.append((MARKS, marks))
    ctes.append((UNSURE, _unsure_keys(spec, sources)))

    def keys_of(name: str) -> exp.Select:
        return exp.select(*cols(keys)).from_(relation(name))

    def split(source: str, name: str, join_type: str) -> exp.Select:
        return (
            exp.select("*")
            .from_(relation(source))
            .join(relation(name), using=using(keys), join_type=join_type)
        )

    # Lonely rows of keys inserted again in ``entries`` (or repeated across lonely files) are
    # settled with those keys; the others stay unless a mark of theirs cancels them.
    inserted_again: exp.Query = exp.select(*cols(keys)).from_(entries.copy()).where(is_insertion())
    if sources.repeated_keys is not None:
        inserted_again = exp.union(inserted_again, keys_of(sources.repeated_keys), distinct=False)
    ctes.append((DELETED, _deleted_marks(spec, sources)))
    lonely_alone = _lonely_rows_left_by_marks(
        spec,
        dialect,
        sources,
        exp.select("*")
        .from_(relation(sources.lonely))
        .join(exp.paren(inserted_again, copy=False), using=using(keys), join_type="anti"),
        shown,
    )
    latest_alone = exp.select(*cols(shown)).from_(
        exp.paren(split(LATEST_INSERTIONS, UNSURE, "anti"), copy=False)
    )
    null_keyed = (
        exp.select(*cols(shown)).from_(entries.copy()).where(exp.and_(is_insertion(), null_keys))
    )
    both = exp.union(
        split(sources.entries, UNSURE, "semi"),
        split(sources.lonely, UNSURE, "semi"),
        distinct=False,
    )
    ctes.append((CROWDED_ENTRIES, both))
    live = live_entries(list(spec.value_columns), _floats(spec), dialect).from_(
        relation(CROWDED_ENTRIES)
    )
    settled = exp.union(
        exp.union(lonely_alone, latest_alone, distinct=False), null_keyed, distinct=False
    )
    return exp.union(settled, _latest_of_live(spec, live, system_columns, ctes), distinct=False)


def _deleted_marks(spec: TableSpec, sources: Sources) -> exp.Query:
    """The marks, in :func:`_live_rows_after_lonely`, of keys without an insertion in
    ``sources.entries`` (deletes of older rows) and found in at most one lonely file: the only
    insertion of such a key, if any, is a lonely row, which :func:`_lonely_rows_left_by_marks`
    settles against these marks."""
    keys = list(spec.key_columns)
    deleted: exp.Select = (
        exp.select("*")
        .from_(relation(MARKS))
        .join(relation(LATEST_INSERTIONS), using=using(keys), join_type="anti")
    )
    if sources.repeated_keys is not None:
        deleted = deleted.join(relation(sources.repeated_keys), using=using(keys), join_type="anti")
    return deleted


def _lonely_rows_left_by_marks(
    spec: TableSpec, dialect: Dialect, sources: Sources, lonely: exp.Select, shown: list[str]
) -> exp.Select:
    """The rows of ``lonely`` (lonely rows of keys not inserted again) that no mark cancels.

    A key of such a row either has no entry in ``sources.entries`` or only marks there
    (:func:`_deleted_marks`): no other tuple of it can be live, and its lonely tuple is live
    unless a mark falls in its group of the per-tuple cancellation. So the row stays exactly
    when no mark of the key matches it the way that grouping does: every value equal or both
    NULL (``IS NOT DISTINCT FROM``, NaN meeting NaN) and, for FLOAT/DOUBLE columns, the same
    sign of zero (the cancellation groups by that flag too). A match here decides the answer,
    so it must be exactly the grouping's, no looser. Without deletes of older rows the marks
    compared are none, and the join passes the rows through."""
    assert sources.lonely is not None
    keys = list(spec.key_columns)
    same_key = [exp.EQ(this=col(k, sources.lonely), expression=col(k, DELETED)) for k in keys]
    same_values = [
        exp.NullSafeEQ(this=col(c, sources.lonely), expression=col(c, DELETED))
        for c in spec.value_columns
        if c not in keys
    ]
    same_zero_sign = [  # NULL beside NULL when the value is NULL: the grouping pairs those too
        exp.NullSafeEQ(
            this=exp.paren(dialect.negative_zero(col(c, sources.lonely)), copy=False),
            expression=exp.paren(dialect.negative_zero(col(c, DELETED)), copy=False),
        )
        for c in _floats(spec)
    ]
    return (
        exp.select(*cols(shown))
        .from_(exp.paren(lonely, copy=False).as_(sources.lonely))
        .join(
            relation(DELETED),
            on=exp.and_(*same_key, *same_values, *same_zero_sign),
            join_type="anti",
        )
    )


def _unsure_keys(spec: TableSpec, sources: Sources) -> exp.Query:
    """The keys :func:`_live_rows_after_lonely` cannot settle by their latest insertion: a mark
    carrying the latest insertion's values, keys found in more than one lonely file (the keys
    with marks and no insertion in ``sources.entries`` are settled apart:
    :func:`_deleted_marks`)."""
    keys = list(spec.key_columns)
    same_key = [exp.EQ(this=col(k, MARKS), expression=col(k, LATEST_INSERTIONS)) for k in keys]
    same_values = [
        exp.NullSafeEQ(this=col(c, MARKS), expression=col(c, LATEST_INSERTIONS))
        for c in spec.value_columns
        if c not in keys
    ]
    cancelling = (
        exp.select(*(col(k, MARKS) for k in keys))
        .from_(relation(MARKS))
        .join(
            relation(LATEST_INSERTIONS),
            on=exp.and_(*same_key, *same_values),
            join_type="semi",
        )
    )
    unsure: exp.Query = cancelling
    if sources.repeated_keys is not None:
        repeated = exp.select(*cols(keys)).from_(relation(sources.repeated_keys))
        unsure = exp.union(unsure, repeated, distinct=False)
    return unsure


def _latest_of_live(
    spec: TableSpec, live: exp.Select, system_columns: bool, ctes: list[tuple[str, exp.Query]]
) -> exp.Select:
    """The latest live row of each key from ``live`` (made by :func:`live_entries`), with the
    system columns of its insertion when asked."""
    values = list(spec.value_columns)
    shown = shown_columns(spec, system_columns)
    extra: list[exp.Expr] = []
    if system_columns:
        shift = number(ORDER_SHIFT)
        extra = [
            alias(exp.cast(exp.IntDiv(this=col(ORDER), expression=shift), "BIGINT"), TRX_ID),
            alias(exp.cast(exp.Mod(this=col(ORDER), expression=shift.copy()), "INT"), TRX_SEQ),
        ]
    picked = shown[: len(values)] if system_columns else shown
    ctes.append((LIVE, live))
    return latest_live_rows(relation(LIVE), list(spec.key_columns), picked, _floats(spec), extra)


def _floats(spec: TableSpec) -> list[str]:
    """The FLOAT/DOUBLE value columns, whose -0.0 and 0.0 are kept apart."""
    return [
        c for c in spec.value_columns if c in spec.columns and pa.types.is_floating(spec.type_of(c))
    ]


def aggregated_rows(spec: TableSpec, entries: str) -> exp.Select:
    """Aggregated semantics: one row per group key with its measures merged; a group whose
    count measure nets to zero holds no rows."""
    keys = list(spec.key_columns)
    selected: list[exp.Expr] = cols(keys)
    counts = []
    for column, function, sql_type in spec.policy.aggregates():
        if function in ("sum", "count"):
            signed = exp.Sum(this=weighted_by_sign(col(column)))
            total = exp.Coalesce(this=signed, expressions=[number(0)])
            selected.append(alias(exp.cast(total, sql_type), column))
            if function == "count":
                counts.append(column)
        else:
            selected.append(alias(exp.func(function, col(column)), column))
    query = exp.select(*selected).from_(relation(entries)).group_by(*cols(keys))
    if counts:
        signed = exp.Sum(this=weighted_by_sign(col(counts[0])))
        total = exp.Coalesce(this=signed, expressions=[number(0)])
        query = query.having(exp.NEQ(this=total, expression=number(0)))
    return query
