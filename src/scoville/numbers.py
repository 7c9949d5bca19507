"""How every output writes a number: significant digits, thousands separators, never an exponent.

One rule for the terminal, the report and ``compare`` (a reader once met 8,013, 11.4k and 1.2e+04 in one
session): ``significant`` keeps three significant digits below 1,000 and whole numbers with separators above
(12,258 · 169 · 45.2 · 0.5 · 0.000123); terminal tables, which must fit 80 columns, switch to k and M from
10,000 up (``compact``). Nothing here imports anything, so any module may use it.
"""

from __future__ import annotations

import math

MISSING = "—"


def significant(v: float, digits: int = 3) -> str:
    """``v`` to ``digits`` significant digits (all of its integer digits above that), in fixed notation."""
    if not math.isfinite(v):
        return str(v)
    if v == 0:
        return "0"
    exponent = math.floor(math.log10(abs(v)))
    if abs(round(v, max(digits - 1 - exponent, 0))) >= 10 ** (exponent + 1):
        exponent += 1            # 9.996 rounds up to 10.0, which has one decimal fewer
    text = f"{v:,.{max(digits - 1 - exponent, 0)}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text    # 0.5, not 0.500, as %g writes it


def compact(v: float) -> str:
    """A narrow cell: ``significant`` below 10,000, then 11.4k, 250k, 1.2M."""
    a = abs(v)
    if a >= 1e6:
        return significant(v / 1e6) + "M"
    if a >= 1e4:
        return significant(v / 1e3) + "k"
    return significant(v)
