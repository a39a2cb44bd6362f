"""Errors raised on executors, back on the driver as the ledger errors they were."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

from pyspark.errors import AnalysisException, NumberFormatException, PythonException

from ledger import errors
from ledger.errors import StorageError

# A query that is wrong for the data: it does not parse or bind (AnalysisException, and
# ParseException, its subclass), or a cast fails (ANSI mode).
QUERY_ERRORS: tuple[type[Exception], ...] = (AnalysisException, NumberFormatException)

_TASK_ERROR = re.compile(r"ledger\.errors\.(\w+): ([^\n]*)")


@contextmanager
def task_errors(what: str) -> Iterator[None]:
    """Re-raise a ledger error an executor raised as itself (Spark wraps it in text), and a
    failure to read or write data as :class:`StorageError`."""
    try:
        yield
    except PythonException as e:
        raise _unwrapped(e, what) from e
    except Exception as e:
        if type(e).__name__ == "Py4JJavaError" and "PythonException" in str(e):
            raise _unwrapped(e, what) from e
        raise


def _unwrapped(e: Exception, what: str) -> Exception:
    found = _TASK_ERROR.findall(str(e))
    for name, message in reversed(found):
        kind = getattr(errors, name, None)
        if isinstance(kind, type) and issubclass(kind, errors.LedgerError):
            return kind(message)
    if "OSError" in str(e) or "IOError" in str(e) or "FileNotFoundError" in str(e):
        return StorageError(f"{what}: an executor could not read or write data: {e}")
    return e
