"""Scrape the target server's Prometheus /metrics during every load point (docs/server-metrics.md).

One ``Scraper`` per sweep. ``start`` scrapes once, synchronously, just before a point sends its first request,
then a background thread scrapes every ``interval_s``; ``stop`` ends the thread, scrapes once more after the
point's last request finished, and stores the point's samples. The start and end scrapes bound the window
whose histogram and counter deltas ``scoville.server_metrics`` turns into per-point columns.

A server without Prometheus metrics (404, refused, JSON or HTML, no engine metric scoville knows) is found by
``probe`` before the first point: one warning, and the sweep goes on without server figures. A thread and a
blocking GET on a kept-alive connection are enough: at 1 Hz the cost is about a millisecond of CPU a second
(bench/bench_server_scrape.py measures it), and the client's event loops are left alone.
"""

from __future__ import annotations

import http.client
import threading
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

import pyarrow as pa

from scoville.client.config import ClientConfig
from scoville.results.server_store import write_server_point
from scoville.server_metrics import (
    NotPrometheus,
    Sample,
    SampleParser,
    Scrape,
    samples_table,
    server_requests,
    window_figures,
)

# trtllm-serve answers /metrics with JSON iteration stats and serves Prometheus text on /prometheus/metrics.
PATHS = ("/metrics", "/prometheus/metrics")
TIMEOUT_S = 2.0
# How long the end scrape waits for the server's finished-request count to catch up with the client's:
# some servers record a request's metrics just after its last byte is sent.
SETTLE_S = 2.0
SETTLE_STEP_S = 0.05


class ScrapeError(Exception):
    """One scrape failed; the message says why in a few words."""


class _Getter:
    """GET on one kept-alive connection (a fresh connection per scrape costs more CPU than parsing the page).

    No proxy from the environment (the client's own requests ignore it too), no redirects. Used by one thread
    at a time: the sweep's thread before and after a point, the scrape thread during it.
    """

    def __init__(self, base_url: str, headers: dict[str, str]) -> None:
        parts = urlsplit(base_url)
        self.https, self.netloc, self.prefix = parts.scheme == "https", parts.netloc, parts.path.rstrip("/")
        self.headers = headers
        self.conn: http.client.HTTPConnection | None = None

    def get(self, path: str) -> tuple[int, bytes]:
        reused = self.conn is not None
        if self.conn is None:
            kind = http.client.HTTPSConnection if self.https else http.client.HTTPConnection
            self.conn = kind(self.netloc, timeout=TIMEOUT_S)
        try:
            self.conn.request("GET", self.prefix + path, headers=self.headers)
            response = self.conn.getresponse()
            body = response.read()
        except (http.client.HTTPException, OSError):
            self.close()
            if reused:   # the server closed the idle connection: once more on a new one
                return self.get(path)
            raise
        if response.will_close:
            self.close()
        return response.status, body

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


class Scraper:
    """Scrapes ``cfg.base_url``'s metrics around and during each point; does nothing when off or unavailable."""

    def __init__(self, cfg: ClientConfig, now: Callable[[], float], interval_s: float,
                 warn: Callable[[str], None]) -> None:
        self.cfg, self.now, self.interval_s, self.warn = cfg, now, interval_s, warn
        self._getter = _Getter(cfg.base_url, {k: v for k, v in cfg.headers().items() if k != "Content-Type"})
        self._parser = SampleParser()
        self.path: str | None = None
        self.status = "off" if interval_s <= 0 else "not probed"
        self._rows: list[tuple[float, int, Sample]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._point = -1
        self._failed = False

    @property
    def active(self) -> bool:
        return self.path is not None

    def manifest(self) -> dict[str, object]:
        return {"path": self.path, "interval_s": self.interval_s, "status": self.status}

    def _fetch(self, path: str) -> list[Sample]:
        try:
            status, raw = self._getter.get(path)
        except (http.client.HTTPException, OSError) as e:
            raise ScrapeError(self.cfg.redact(str(e) or type(e).__name__)[:120]) from None
        if status != 200:
            raise ScrapeError(f"HTTP {status}")
        try:
            return self._parser.parse(raw.decode("utf-8", errors="replace"))
        except NotPrometheus as e:
            raise ScrapeError(f"not Prometheus text ({e})") from None

    def probe(self) -> bool:
        """Find where the server serves engine metrics; warn once and stay off when it serves none."""
        if self.interval_s <= 0:
            return False
        why = []
        for path in PATHS:
            try:
                samples = self._fetch(path)
            except ScrapeError as e:
                why.append(f"{path}: {e}")
                continue
            if samples:
                self.path, self.status = path, "scraped"
                return True
            why.append(f"{path}: no vLLM, SGLang, TensorRT-LLM or Dynamo engine metrics")
        self.status = "unavailable: " + "; ".join(why)
        self.warn(f"no server-side metrics from {self.cfg.base_url} ({'; '.join(why)}); the run goes on "
                  "without them (--scrape-interval 0 turns scraping off)")
        return False

    def _scrape(self) -> bool:
        """One scrape into the window's rows; False when it failed (warned once per run)."""
        assert self.path is not None
        t = self.now()
        try:
            samples = self._fetch(self.path)
        except ScrapeError as e:
            if not self._failed:
                self._failed = True
                self.warn(f"a scrape of {self.cfg.base_url}{self.path} failed ({e}); server-side figures of "
                          "the points it falls in may be missing (said once per run)")
            return False
        with self._lock:
            self._rows += [(t, self._point, s) for s in samples]
        return True

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._scrape()

    def start(self, point: int) -> None:
        """Scrape now (the window's start) and every ``interval_s`` until ``stop``."""
        if not self.active:
            return
        self._point = point
        with self._lock:
            self._rows = []
        self._scrape()
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="scoville-scrape", daemon=True)
        self._thread.start()

    def _halt(self) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None

    def stop(self, run_dir: Path, finished: int) -> pa.Table | None:
        """End the window: scrape until the server counts ``finished`` requests (or ``SETTLE_S`` passes),
        store the point's samples in the run, and return them (None when not scraping)."""
        if not self.active:
            return None
        self._halt()
        deadline = time.monotonic() + SETTLE_S
        while True:
            scraped = self._scrape()
            if self._caught_up(finished) or time.monotonic() >= deadline:
                break
            if scraped:   # only the final end scrape stays: the others would read idle gauges
                self._drop_last_scrape()
            time.sleep(SETTLE_STEP_S)
        with self._lock:
            rows, self._rows = self._rows, []
        table = samples_table(rows)
        if table.num_rows:
            write_server_point(run_dir, self._point, table)
        return table

    def _drop_last_scrape(self) -> None:
        with self._lock:
            if len({t for t, _, _ in self._rows}) > 1:
                last = self._rows[-1][0]
                self._rows = [r for r in self._rows if r[0] != last]

    def _caught_up(self, finished: int) -> bool:
        with self._lock:
            by_t: dict[float, Scrape] = {}
            for t, _, s in self._rows:
                by_t.setdefault(t, {})[(s.metric, s.labels)] = s.value
        if len(by_t) < 2:
            return True   # no start scrape to compare with: nothing to wait for
        ordered = [by_t[k] for k in sorted(by_t)]
        count = server_requests(window_figures([ordered[0], ordered[-1]], self.cfg.model or None))
        return count is None or count >= finished

    def close(self) -> None:
        """Stop the thread (storing nothing: a point still running was interrupted) and the connection."""
        self._halt()
        self._getter.close()

