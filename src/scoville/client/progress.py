"""Live Rich progress of a sweep: point, requests done/total, current TTFT/TPOT medians, errors.

Medians are over the last ``window`` finished requests of the point, so the
line shows where latency is *now*, not since the point began. Rendering runs
on Rich's refresh thread at a few Hz; ``record`` only appends to a deque.
"""

from __future__ import annotations

from collections import deque
from statistics import median
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.markup import escape
from rich.text import Text

from scoville.load import LoadPoint
from scoville.results.schema import RequestRecord


class LiveProgress:
    """``enabled``: a line per point (start and result), on a terminal or not, so a CI log shows a long sweep
    moving; ``live``: the refreshing status line as well (a terminal only: a log would get every refresh)."""

    def __init__(self, console: Console, *, window: int = 200, enabled: bool = True, live: bool = True) -> None:
        self.console = console
        self.enabled = enabled
        self.live = live
        self._ttft: deque[float] = deque(maxlen=window)
        self._tpot: deque[float] = deque(maxlen=window)
        self._done = self._errors = self._total = 0
        self._label = ""
        self._position = (0, 0)
        self._last_error = ""
        self._live: Live | None = None

    def __enter__(self) -> LiveProgress:
        if self.enabled and self.live:
            self._live = Live(self, console=self.console, refresh_per_second=4, transient=True)
            self._live.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._live is not None:
            self._live.__exit__(*exc)
            self._live = None

    def __rich__(self) -> Text:
        ttft = f"{median(self._ttft) * 1e3:.1f} ms" if self._ttft else "–"
        tpot = f"{median(self._tpot) * 1e3:.2f} ms" if self._tpot else "–"
        pos, n = self._position
        line = Text.assemble(
            ("point ", "dim"), (f"{self._label}", "bold"), (f" ({pos + 1}/{n or '?'})  ", "dim"),
            (f"{self._done}/{self._total or '?'} requests  ", ""),
            ("TTFT p50 ", "dim"), (ttft, "cyan"), ("  TPOT p50 ", "dim"), (tpot, "cyan"),
            ("  errors ", "dim"), (str(self._errors), "red" if self._errors else "green"),
        )
        if self._last_error:
            line.append(f"  last error: {self._last_error[:80]}", style="red")
        return line

    def start_point(self, point: LoadPoint, position: int, total: int) -> None:
        self._ttft.clear()
        self._tpot.clear()
        self._done = self._errors = 0
        self._total = point.total_requests
        self._label = point.describe()
        self._position = (position, total)
        self._last_error = ""
        if self.enabled and not self.live:
            warm = f" after {point.warmup_requests} warm-up" if point.warmup_requests else ""
            self.console.print(f"point {escape(self._label)} ({position + 1}/{total or '?'}): {point.num_requests} "
                               f"requests{warm}", soft_wrap=True)

    def record(self, rec: RequestRecord) -> None:
        self._done += 1
        if not rec.ok:
            self._errors += 1
            self._last_error = rec.error or ""
            return
        if rec.t_first_token is not None:
            self._ttft.append(rec.t_first_token - rec.t_sent)
            if rec.output_tokens > 1 and rec.t_done is not None:
                self._tpot.append((rec.t_done - rec.t_first_token) / (rec.output_tokens - 1))

    def end_point(self, point: LoadPoint, row: dict[str, Any] | None) -> None:
        if not self.enabled or row is None:
            return
        tpot = row.get("tpot_s_median")
        invalid = [str(r.get("code")) for r in row.get("invalid_reasons") or []] if row.get("valid") is False else []
        self.console.print(   # one line per point in a log too: never wrapped at the console's width
            f"[green]✓[/] {escape(point.describe()):>9}  {row.get('num_ok', 0)} ok, {row.get('num_errors', 0)} errors  "
            f"TTFT p50 {(row.get('ttft_s_median') or 0) * 1e3:.1f} ms  "
            f"TPOT p50 {(tpot or 0) * 1e3:.2f} ms  "
            f"{row.get('output_throughput') or 0:.0f} out tok/s"
            + (f"  [yellow]invalid: {escape(', '.join(invalid))}[/]" if invalid else ""), soft_wrap=True)

    def warn(self, message: str) -> None:
        """A finding about the measurement itself (cached prompts): said at once, on stderr, in or out of a terminal."""
        self.console.print(f"[yellow]warning[/]: {escape(message)}")
