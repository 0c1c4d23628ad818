"""Rows as a pandas DataFrame, for the Python API's ``to_dataframe()`` methods. pandas is optional:
it is imported only when a DataFrame is asked for, and its absence is a clear error, not a
traceback from deep inside."""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import Any


class PandasMissing(ImportError):
    """``to_dataframe()`` without pandas installed."""

    def __init__(self) -> None:
        super().__init__("to_dataframe() needs pandas, which is not installed: pip install pandas")


def dataframe(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> Any:
    """A ``pandas.DataFrame`` of ``rows`` with ``columns`` in this order (also when there are no rows)."""
    try:
        pandas = importlib.import_module("pandas")
    except ImportError as e:
        raise PandasMissing() from e
    return pandas.DataFrame(list(rows), columns=list(columns))
