"""SQL text helpers shared by the engines and views: one way to quote names."""

from __future__ import annotations

from sqlglot import exp


def ident(name: str, dialect: str = "duckdb") -> str:
    r'''A quoted identifier, safe for any column name (spaces, quotes, unicode, reserved words).

    >>> print(ident('my "col"'))
    "my ""col"""
    '''
    return str(exp.to_identifier(name, quoted=True).sql(dialect=dialect))


def idents(names: list[str] | tuple[str, ...], dialect: str = "duckdb") -> str:
    """Comma-separated quoted identifiers."""
    return ", ".join(ident(n, dialect) for n in names)
