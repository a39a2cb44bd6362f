"""The ``ledger`` command: the library's verbs from a shell.

>>> from ledger.cli import main
>>> main(["--help"])                                                    # doctest: +SKIP

Every subcommand only parses its arguments and calls the library (``ledger.connect``,
``Warehouse``, ``Table``, and the reads ``views`` publishes, from ``ledger.reads``); results are
printed as aligned tables on a terminal, CSV when piped, JSON with ``--json``.
"""

from __future__ import annotations

from ledger.cli.app import cli, main

__all__ = ["cli", "main"]
