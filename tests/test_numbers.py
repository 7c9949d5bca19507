"""One way to write a number everywhere: significant digits, separators, never an exponent."""

import pytest

from scoville.analysis.compare import fmt_ms, fmt_usd, fmt_value
from scoville.cli.point_table import fmt_cell
from scoville.numbers import compact, significant


@pytest.mark.parametrize("value, text", [
    (12258.3, "12,258"), (169.4, "169"), (45.23, "45.2"), (0.1234, "0.123"), (0.0001234, "0.000123"),
    (9.996, "10"), (999.96, "1,000"), (0.5, "0.5"), (-3.14159, "-3.14"), (0, "0"), (67315495.2, "67,315,495"),
])
def test_significant_keeps_three_digits_and_never_writes_an_exponent(value, text):
    assert significant(value) == text


@pytest.mark.parametrize("value, text", [(8013, "8,013"), (11400, "11.4k"), (250_000, "250k"), (1.2e6, "1.2M"),
                                         (12_000, "12k")])
def test_compact_cells_switch_to_k_and_m_from_ten_thousand(value, text):
    assert compact(value) == text


def test_every_formatter_shares_the_rule():
    assert fmt_value(12_258.3) == "12,258" and fmt_value(None) == "—"
    assert fmt_usd(1234.5) == "$1,234" and fmt_usd(0.0512) == "$0.0512"
    assert fmt_ms(0.0452) == "45.2" and fmt_ms(12.3) == "12,300"
    assert fmt_cell(0.0452, 1e3) == "45.2" and fmt_cell(12_000.0) == "12k"
    for v in (1.2e-7, 3.3e-5, 1e15):
        assert "e" not in significant(v) and "e" not in compact(v)
