"""The root of the ``ledger`` command: global options, errors, and the subcommands.

Errors are one line on stderr with exit code 1 (2 for a bad command line); ``--debug`` shows
the traceback instead.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import click
import duckdb
import pyarrow as pa

from ledger.cli import bench, catalog, maintenance, query, reading, writing
from ledger.cli.session import DEFAULT_WAREHOUSE, CommandError, Session
from ledger.errors import LedgerError, TableDroppedError

# Errors of the engines the library drives, reported as they are (a SQL error names its cause).
_ENGINE_ERRORS: tuple[type[Exception], ...] = (duckdb.Error, pa.ArrowException)

EXAMPLES = """
\b
Examples:
  ledger init ./warehouse
  ledger -w ./warehouse create payments --schema 'id VARCHAR, amount DECIMAL(18,2)' --key id
  ledger -w ./warehouse load payments payments.csv
  ledger -w ./warehouse show payments --where "amount > 10" --limit 20
  ledger -w s3://bucket/wh --endpoint-url http://127.0.0.1:9000 tables
"""


class LedgerGroup(click.Group):
    """A group whose failures are one line unless ``--debug`` is given."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.ClickException, click.exceptions.Exit, click.Abort, BrokenPipeError):
            raise  # click reports these itself (a closed pipe quietly: `ledger show t | head`)
        except Exception as e:
            if _debug(ctx):
                raise
            if isinstance(e, TableDroppedError):  # its own message speaks of the Python API
                raise CommandError(
                    "TableDroppedError: the table was dropped while the command ran; nothing "
                    "was committed; run the command again"
                ) from e
            if isinstance(e, (LedgerError, OSError, *_ENGINE_ERRORS)):
                raise CommandError(_one_line(e)) from e
            # Not a failure the library reports: still one line, with the way to see more.
            raise CommandError(f"{_one_line(e)} (run with --debug for the traceback)") from e


def _debug(ctx: click.Context) -> bool:
    root = ctx.find_root()
    return bool(root.params.get("debug"))


def _one_line(error: BaseException) -> str:
    text = " ".join(str(error).split()) or type(error).__name__
    return f"{type(error).__name__}: {text}"


@click.group(
    cls=LedgerGroup, epilog=EXAMPLES, context_settings={"help_option_names": ["-h", "--help"]}
)
@click.option(
    "-w",
    "--warehouse",
    envvar="LEDGER_WAREHOUSE",
    default=DEFAULT_WAREHOUSE,
    show_default=True,
    help="The warehouse: a local path, file:// or s3://bucket/prefix (env LEDGER_WAREHOUSE).",
)
@click.option(
    "--endpoint-url",
    envvar=["AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"],
    help="S3 endpoint (MinIO, R2, a test server) of the warehouse and of s3:// load sources; env "
    "AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL. Credentials come from AWS_ACCESS_KEY_ID / "
    "AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN or the usual AWS chain.",
)
@click.option("--region", envvar=["AWS_REGION", "AWS_DEFAULT_REGION"], help="S3 region.")
@click.option("--debug", is_flag=True, help="Show tracebacks and the library's log.")
@click.version_option(package_name="ledger-tables", prog_name="ledger")
@click.pass_context
def cli(
    ctx: click.Context,
    warehouse: str,
    endpoint_url: str | None,
    region: str | None,
    debug: bool,
) -> None:
    """Ledger tables from the shell: create, load, read, query and maintain them."""
    options = {"endpoint_url": endpoint_url, "region": region}
    ctx.obj = Session(
        warehouse_uri=warehouse,
        s3_options={k: v for k, v in options.items() if v},
        debug=debug,
    )
    logging.basicConfig(level=logging.INFO if debug else logging.WARNING)


def _register() -> None:
    for module in (catalog, writing, reading, query, maintenance, bench):
        for command in module.COMMANDS:
            cli.add_command(command)


_register()


def main(argv: Sequence[str] | None = None) -> None:
    """Run the command (``argv`` defaults to the process arguments)."""
    cli.main(args=list(argv) if argv is not None else None, prog_name="ledger")
