"""Checks of public arguments: a wrong type or a value the log cannot hold is an
:class:`InvalidArgumentError` before anything is written, never a raw ``TypeError``,
``ValueError`` or ``OverflowError`` from deep inside.

The log's integers are signed 64-bit (docs/format.md section 2), so every integer that goes into
it (batches, versions, intervals, timeouts in milliseconds) is checked against that range.

>>> whole_number(3, "batch")
3
"""

from __future__ import annotations

import datetime as dt
import difflib
import math
import numbers
from collections.abc import Sequence
from typing import Any

from ledger.errors import InvalidArgumentError

INT64_MAX = 2**63 - 1


def whole_number(value: Any, what: str, *, minimum: int = 0, maximum: int = INT64_MAX) -> int:
    """``value`` as an int if it is an integer (Python's or NumPy's; not a bool) in
    ``[minimum, maximum]``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise InvalidArgumentError(
            f"{what} must be a whole number, not {type(value).__name__} {value!r}"
        )
    number = int(value)
    if not minimum <= number <= maximum:
        raise InvalidArgumentError(
            f"{what} must be between {minimum} and {maximum} (the log keeps 64-bit integers), "
            f"not {number}"
        )
    return number


def positive_seconds(value: Any, what: str) -> float:
    """A finite, positive number of seconds whose milliseconds fit the log."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidArgumentError(
            f"{what} must be a number of seconds, not {type(value).__name__} {value!r}"
        )
    if not math.isfinite(value) or value <= 0 or value * 1000 >= INT64_MAX:
        raise InvalidArgumentError(
            f"{what} must be a finite, positive number of seconds (at most {INT64_MAX // 1000}), "
            f"not {value!r}"
        )
    return float(value)


def flag(value: Any, what: str) -> bool:
    """``value`` if it is True or False (a truthy string must not pass for True)."""
    if not isinstance(value, bool):
        raise InvalidArgumentError(f"{what} must be True or False, not {value!r}")
    return value


def column_names(value: Any, what: str) -> list[str]:
    """A column name or a sequence of them (None: none)."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if not isinstance(value, Sequence) or not all(isinstance(c, str) for c in value):
        raise InvalidArgumentError(
            f"{what} must be a column name or a list of column names, not {value!r}"
        )
    return list(value)


def version(value: Any) -> int | None:
    """A table version: None (the latest) or a whole number >= 0."""
    if value is None:
        return None
    return whole_number(value, "version")


def timestamp_ms(value: Any) -> int | None:
    """A point in time as epoch milliseconds: None, a datetime (naive means UTC) or an int of
    milliseconds."""
    if value is None:
        return None
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.UTC)
        return int(value.timestamp() * 1000)
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise InvalidArgumentError(
            f"timestamp must be a datetime or epoch milliseconds (int), not "
            f"{type(value).__name__} {value!r}"
        )
    return whole_number(value, "timestamp (epoch milliseconds)", minimum=-INT64_MAX - 1)


def closest_names(name: str, candidates: Sequence[str]) -> str:
    """``; did you mean 'x'?`` naming the candidates ``name`` most likely misspells (the same
    name in other case first), or empty when none is close: the tail of an unknown name's
    message.

    >>> closest_names("amout", ["id", "amount"])
    "; did you mean 'amount'?"
    """
    same_case = [c for c in candidates if c.casefold() == name.casefold()]
    close = same_case or difflib.get_close_matches(name, list(candidates), n=3)
    return f"; did you mean {' or '.join(map(repr, close))}?" if close else ""
