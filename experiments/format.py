"""Numbers as the reports and summary lines print them: one formatter for every report."""

from __future__ import annotations

import math


def number(value, digits: int = 1, sign: bool = False, missing: str = "n/a") -> str:
    """``value`` (a number, or a table cell's text) with ``digits`` decimals, always signed with
    ``sign``; ``missing`` for None, an empty cell or a value that is not finite (E, for one, is
    undefined when the reference group makes no error)."""
    if value is None or (isinstance(value, str) and not value) or not math.isfinite(float(value)):
        return missing
    return f"{float(value):+.{digits}f}" if sign else f"{float(value):.{digits}f}"
