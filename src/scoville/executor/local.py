"""Worker processes on this machine: the default executor.

Processes, not threads: simulations and searches are CPU-bound Python. The
pool uses the ``spawn`` start method because callers may hold threads (an
asyncio loop, a Rich live display) that ``fork`` would copy mid-state; the
cost is a fraction of a second per worker at start-up, paid once per
executor. With one worker (or one item) the work runs in this process: a pool
of one buys isolation nobody asked for at the price of a process start.
``fn`` and the items must be picklable (module-level functions, plain data).
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from scoville.errors import UserError
from scoville.executor.base import Executor, TaskResult, task_error


def default_workers() -> int:
    """Cores this process may use (respects CPU affinity / container limits)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


class LocalExecutor(Executor):
    """A process pool of ``max_workers`` (default: the usable cores)."""

    kind = "local"

    def __init__(self, max_workers: int | None = None) -> None:
        if max_workers is not None and max_workers < 1:
            raise UserError(f"--workers must be >= 1 (got {max_workers})")
        self.max_workers = max_workers or default_workers()
        self._pool: ProcessPoolExecutor | None = None

    def _get_pool(self) -> ProcessPoolExecutor:
        if self._pool is None:
            self._pool = ProcessPoolExecutor(self.max_workers, mp_context=multiprocessing.get_context("spawn"))
        return self._pool

    def submit(self, fn: Callable[[Any], Any], items: Iterable[Any]) -> Iterator[TaskResult]:
        items = list(items)
        if self.max_workers == 1 or len(items) <= 1:
            return self._inline(fn, items)
        return self._pooled(fn, items)

    @staticmethod
    def _inline(fn: Callable[[Any], Any], items: list[Any]) -> Iterator[TaskResult]:
        for i, item in enumerate(items):
            try:
                value = fn(item)
            except Exception as e:
                yield TaskResult(i, error=task_error(i, item, e))
            else:
                yield TaskResult(i, value=value)

    def _pooled(self, fn: Callable[[Any], Any], items: list[Any]) -> Iterator[TaskResult]:
        pool = self._get_pool()
        futures: dict[Future, int] = {pool.submit(fn, item): i for i, item in enumerate(items)}
        pending = set(futures)
        broken = False
        try:
            while pending:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                for fut in sorted(done, key=futures.__getitem__):
                    i = futures[fut]
                    exc = fut.exception()
                    if exc is not None:
                        broken = broken or isinstance(exc, BrokenProcessPool)
                        yield TaskResult(i, error=task_error(i, items[i], exc))
                    else:
                        yield TaskResult(i, value=fut.result())
        finally:
            for fut in pending:  # the caller stopped early (failure, Ctrl-C): drop what has not started
                fut.cancel()
            if broken and self._pool is pool:  # a worker died (OOM kill, segfault): the next call gets a new pool
                pool.shutdown(wait=False, cancel_futures=True)
                self._pool = None

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, "workers": self.max_workers}

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
