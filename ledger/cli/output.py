"""Printing results: aligned tables on a terminal, CSV when piped, JSON when asked.

JSON values are typed so that nothing is lost: DECIMAL values are strings (``"100.50"``, exact
where a JSON number would become a binary float), dates and timestamps ISO 8601 strings,
NaN and infinities the strings ``"NaN"``, ``"Infinity"`` and ``"-Infinity"``, durations as
they are written on the command line (``"7d"``, ``"0s"``), binary values hex;
integers, floats, booleans and NULL are JSON's own.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import math
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import click
import pyarrow as pa
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table as RichTable
from rich.text import Text

from ledger.cli.parsing import duration_text

F = TypeVar("F", bound=Callable[..., Any])

TABLE, JSON, CSV = "table", "json", "csv"


def output_options(function: F) -> F:
    """``--json`` and ``--csv`` on a command that prints results."""
    function = click.option(
        "--csv", "output_format", flag_value=CSV, help="Print CSV (the default when piped)."
    )(function)
    function = click.option(
        "--json", "output_format", flag_value=JSON, help="Print JSON (DECIMAL values as strings)."
    )(function)
    return function


def chosen_format(asked: str | None) -> str:
    if asked:
        return asked
    return TABLE if sys.stdout.isatty() else CSV


def print_rows(
    rows: pa.Table | Sequence[Mapping[str, Any]],
    asked: str | None,
    *,
    title: str | None = None,
    columns: Sequence[str] | None = None,
    caption: str | None = None,
) -> None:
    """Print rows (an Arrow table or a list of dicts) in the chosen format (``caption``: a
    note under a terminal table)."""
    names, records = _records(rows, columns)
    output = chosen_format(asked)
    if output == JSON:
        click.echo(json.dumps([_json_record(r) for r in records], ensure_ascii=False))
    elif output == CSV:
        _write_csv(names, records)
    else:
        Console().print(_table_of(names, records, title, caption))


def fits_terminal(rows: Sequence[Mapping[str, Any]], columns: Sequence[str]) -> bool:
    """Whether the terminal table of ``rows`` fits the terminal's width without folding a
    value over several lines."""
    console = Console()
    table = _table_of(list(columns), [dict(r) for r in rows], None, None)
    # Measured without the terminal's limit: the width the table takes when nothing folds.
    unlimited = console.options.update(max_width=_WIDEST_TABLE)
    return bool(Measurement.get(console, unlimited, table).maximum <= console.width)


_WIDEST_TABLE = 100_000


def print_object(value: Mapping[str, Any], asked: str | None, *, title: str | None = None) -> None:
    """Print one result (what an operation did): a JSON object, one row of CSV, or a table of
    its fields on a terminal."""
    chosen = chosen_format(asked)
    if chosen == JSON:
        click.echo(json.dumps(_json_value(dict(value)), ensure_ascii=False))
    elif chosen == TABLE:  # one field a line: readable however many fields there are
        fields = [{"field": k, "value": text(v)} for k, v in value.items()]
        Console().print(_table_of(["field", "value"], fields, title, None))
    else:
        print_rows([dict(value)], asked, title=title)


def _records(
    rows: pa.Table | Sequence[Mapping[str, Any]], columns: Sequence[str] | None
) -> tuple[list[str], list[dict[str, Any]]]:
    if isinstance(rows, pa.Table):
        unique = unique_names(rows.column_names)
        shortest = [_shortest_floats(column) for column in rows.columns]
        return unique, pa.Table.from_arrays(shortest, names=unique).to_pylist()
    records = [dict(r) for r in rows]
    if columns is not None:
        return list(columns), records
    names: dict[str, None] = {}
    for record in records:
        names.update(dict.fromkeys(record))
    return list(names), records


def unique_names(names: Sequence[str]) -> list[str]:
    """``names`` with each repeat renamed ``<name>_1``, ``<name>_2``, ... (as DuckDB names them
    in a DataFrame), skipping names already taken: a query may name two columns alike, and
    records keyed by name would keep only one."""
    taken = set(names)
    seen: set[str] = set()
    unique = []
    for name in names:
        if name in seen:
            suffix = 1
            while f"{name}_{suffix}" in taken:
                suffix += 1
            name = f"{name}_{suffix}"
            taken.add(name)
        seen.add(name)
        unique.append(name)
    return unique


def _shortest_floats(column: pa.ChunkedArray) -> pa.ChunkedArray | pa.Array:
    """A FLOAT (32-bit) column as the doubles its shortest text spells: ``0.1``, not the
    ``0.10000000149011612`` the same bits make as a double (the text reads back to the same
    FLOAT)."""
    if not pa.types.is_float32(column.type):
        return column
    import numpy as np

    values = [None if v is None else float(str(np.float32(v))) for v in column.to_pylist()]
    return pa.array(values, pa.float64())


def _json_record(record: Mapping[str, Any]) -> dict[str, Any]:
    return {name: _json_value(value) for name, value in record.items()}


def _json_value(value: Any) -> Any:
    if isinstance(value, decimal.Decimal):
        return plain_decimal(value)
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return duration_text(value)
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, Mapping):
        return {str(k): _json_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_value(v) for v in value]
    return value


def plain_decimal(value: decimal.Decimal) -> str:
    """Positional notation at the column's scale: ``0.0000000000``, never ``0E-10``."""
    return format(value, "f")


def text(value: Any) -> str:
    """A value as one cell of CSV or a terminal table (NULL is empty in CSV)."""
    if value is None:
        return ""
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dt.timedelta):
        return duration_text(value)
    if isinstance(value, decimal.Decimal):
        return plain_decimal(value)
    if isinstance(value, Mapping | list | tuple):
        return json.dumps(_json_value(value), ensure_ascii=False)
    if isinstance(value, float) and not math.isfinite(value):
        return str(_json_value(value))
    return str(value)


def _write_csv(names: list[str], records: list[dict[str, Any]]) -> None:
    # NULL is an empty field and an empty text is "", as `ledger load` reads them back; a
    # field holding the delimiter, a quote, a line break or surrounding spaces is quoted.
    # (The csv module writes both as an empty field.)
    lines = [",".join(map(_csv_field, names))]
    lines += [",".join(_csv_field(_csv_text(r.get(name))) for name in names) for r in records]
    sys.stdout.write("".join(f"{line}\n" for line in lines))


def _csv_text(value: Any) -> str | None:
    return None if value is None else text(value)


def _csv_field(value: str | None) -> str:
    if value is None:
        return ""
    if value == "" or value != value.strip() or any(c in value for c in ',"\n\r'):
        return '"' + value.replace('"', '""') + '"'
    return value


def _table_of(
    names: list[str], records: list[dict[str, Any]], title: str | None, caption: str | None
) -> RichTable:
    table = RichTable(
        title=title, caption=caption, show_lines=False, title_justify="left", caption_justify="left"
    )
    for name in names:
        values = [r.get(name) for r in records if r.get(name) is not None]
        numeric = bool(values) and all(_is_number(v) for v in values)
        # A name folds over lines (every letter shown); values are cut, never folded.
        header = Text(name, overflow="fold")
        least = min(len(name), _LEAST_WIDTH)
        if numeric:
            # A number is never cut: its column keeps the width of the longest one.
            widest = max(len(text(v)) for v in values)
            table.add_column(
                header, justify="right", overflow="ellipsis", min_width=max(widest, least)
            )
        else:
            # Text wraps at spaces; a word wider than its column is cut with an ellipsis
            # rather than folded mid-word onto the next line (--csv or --json show it whole).
            longest = max((len(text(v)) for v in values), default=0)
            table.add_column(
                header,
                justify="left",
                overflow="ellipsis",
                min_width=min(max(least, longest), _LEAST_WIDTH),
            )
    for record in records:
        table.add_row(*[_cell(record.get(name)) for name in names])
    return table


# The narrowest a column of a terminal table gets (its name folds to it).
_LEAST_WIDTH = 4


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float | decimal.Decimal) and not isinstance(value, bool)


def _cell(value: Any) -> Text:
    # A Text, not a string: rich reads markup ("[b]") and emoji codes (":a:") in strings.
    return Text("NULL", style="dim") if value is None else Text(text(value))


def message(line: str) -> None:
    """A note for people (on stderr, so piped results stay clean)."""
    click.echo(line, err=True)
