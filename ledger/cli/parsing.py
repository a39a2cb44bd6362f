"""Turning command-line text into the library's arguments: schemas, durations, points in
time, ``key=value`` options and partition filters."""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*$")
# Seconds per unit. A number without a unit is refused: `--grace 7` meant 7 days to its writer
# and 7 seconds to the parser.
DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_UNIT_NAMES = "s (seconds), m (minutes), h (hours), d (days) or w (weeks)"
# The units a duration is printed in, largest first: weeks are left out so that 7d stays 7d.
_PRINTED_UNITS = ("d", "h", "m", "s")


def schema_text(text: str) -> dict[str, str] | list[tuple[str, str]]:
    """Columns from ``"id BIGINT, amount DECIMAL(18,2)"`` or a JSON object ``{"id": "BIGINT"}``.

    >>> schema_text('id BIGINT, "unit price" DECIMAL(18,2), "x""y" VARCHAR')
    [('id', 'BIGINT'), ('unit price', 'DECIMAL(18,2)'), ('x"y', 'VARCHAR')]
    """
    stripped = text.strip()
    if stripped.startswith("{"):
        return _json_schema(stripped, "--schema")
    columns = []
    for definition in _split_top_level(stripped):
        name, _, data_type = _name_and_rest(definition.strip())
        if not name or not data_type.strip():
            raise click.BadParameter(
                f"{definition.strip()!r} is not 'name TYPE'; write e.g. "
                "--schema 'id BIGINT, amount DECIMAL(18,2)'",
                param_hint="--schema",
            )
        columns.append((name, data_type.strip()))
    if not columns:
        raise click.BadParameter(
            "no columns given; write e.g. --schema 'id BIGINT, amount DECIMAL(18,2)'",
            param_hint="--schema",
        )
    return columns


def schema_file(path: Path) -> Any:
    """Columns from a JSON file (an object of name to type) or a Parquet file's schema."""
    if path.suffix.lower() in (".parquet", ".pq"):
        import pyarrow.parquet as pq

        try:
            return pq.read_schema(path)
        except Exception as e:
            raise click.BadParameter(
                f"{path} is not a readable Parquet file: {e}", param_hint="--schema-file"
            ) from e
    return _json_schema(path.read_text(encoding="utf-8"), "--schema-file")


def _json_schema(text: str, hint: str) -> dict[str, str]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise click.BadParameter(f"not valid JSON: {e}", param_hint=hint) from e
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise click.BadParameter(
            'a JSON schema is an object of column names to SQL types, e.g. {"id": "BIGINT"}',
            param_hint=hint,
        )
    return value


def _split_top_level(text: str) -> list[str]:
    """Split at commas outside parentheses and double quotes."""
    parts: list[str] = []
    current: list[str] = []
    depth, quoted = 0, False
    for character in text:
        if character == '"':
            quoted = not quoted
        elif not quoted and character == "(":
            depth += 1
        elif not quoted and character == ")":
            depth -= 1
        if character == "," and depth == 0 and not quoted:
            parts.append("".join(current))
            current = []
        else:
            current.append(character)
    parts.append("".join(current))
    return [p for p in parts if p.strip()]


def _name_and_rest(definition: str) -> tuple[str, str, str]:
    """Split ``name TYPE``; a quoted name may hold anything, ``""`` standing for ``"``."""
    if not definition.startswith('"'):
        return definition.partition(" ")
    name: list[str] = []
    position = 1
    while position < len(definition):
        character = definition[position]
        if character == '"' and definition[position + 1 : position + 2] == '"':
            name.append('"')
            position += 2
        elif character == '"':
            return "".join(name), " ", definition[position + 1 :]
        else:
            name.append(character)
            position += 1
    return "", "", ""


def duration(text: str) -> dt.timedelta:
    """``30s``, ``15m``, ``2h``, ``7d`` or ``1w``: a number and its unit, which is required.

    >>> duration("7d")
    datetime.timedelta(days=7)
    """
    found = _DURATION.match(text)
    if not found:
        raise ValueError(f"{text!r} is not a duration; write a number and a unit: {_UNIT_NAMES}")
    number, unit = found.groups()
    if not unit:
        raise ValueError(
            f"{text!r} has no unit; write e.g. {number}d or {number}s (units: {_UNIT_NAMES})"
        )
    if unit not in DURATION_UNITS:
        raise ValueError(f"{text!r} has an unknown unit {unit!r}; the units are {_UNIT_NAMES}")
    return dt.timedelta(seconds=float(number) * DURATION_UNITS[unit])


def duration_text(value: dt.timedelta) -> str:
    """A duration as it is written on the command line, in its largest whole unit.

    >>> duration_text(dt.timedelta(days=7)), duration_text(dt.timedelta(0))
    ('7d', '0s')
    """
    seconds = value.total_seconds()
    for unit in _PRINTED_UNITS:
        count, rest = divmod(seconds, DURATION_UNITS[unit])
        if count and not rest:
            return f"{int(count)}{unit}"
    return f"{seconds:g}s"


class Duration(click.ParamType[dt.timedelta]):
    """A click type for duration options: a unit is required; the value is a timedelta."""

    name = "duration"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> dt.timedelta:
        if isinstance(value, dt.timedelta):
            return value
        try:
            return duration(str(value))
        except ValueError as e:
            self.fail(str(e), param, ctx)


def point_in_time(text: str | None) -> dt.datetime | None:
    """An ISO 8601 date or timestamp (naive means UTC) for ``--at``."""
    if text is None:
        return None
    try:
        moment = dt.datetime.fromisoformat(text)
    except ValueError as e:
        raise click.BadParameter(
            f"{text!r} is not an ISO 8601 time; write e.g. 2026-01-31T12:00:00Z",
            param_hint="--at",
        ) from e
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC)


def option_value(text: str) -> Any:
    """A JSON value when the text is one (numbers, lists, true), else the text itself."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def key_values(pairs: Sequence[str], hint: str, *, typed: bool = False) -> dict[str, Any]:
    """``["a=1", "b=x"]`` as a dict; a key given twice gathers its values in a list."""
    found: dict[str, Any] = {}
    for pair in pairs:
        key, equals, value = pair.partition("=")
        if not equals or not key:
            raise click.BadParameter(f"{pair!r} is not key=value", param_hint=hint)
        parsed = option_value(value) if typed else value
        if key in found:
            previous = found[key]
            found[key] = [*previous, parsed] if isinstance(previous, list) else [previous, parsed]
        else:
            found[key] = parsed
    return found


def partition_filter(pairs: Sequence[str]) -> dict[str, Any] | None:
    """``--partition day=2026-01-01 --partition day=2026-01-02`` as the library's filter."""
    if not pairs:
        return None
    return {
        k: v if isinstance(v, list) else [v] for k, v in key_values(pairs, "--partition").items()
    }
