"""The one executor interface: fan independent work out, get results back in order.

Why an interface and not ``multiprocessing`` or Ray directly: a config search
or a sweep of simulations is the same code whether the items run on this
machine's cores or across a Ray cluster, and results must be identical either
way. Callers write ``executor.map(fn, items)`` (ordered, for results) or
iterate ``executor.submit(fn, items)`` (completion order, for progress) and
never touch the backend.

A failing item never disappears into a pool: its exception comes back as a
:class:`TaskError` naming the item's index and value, so "candidate 17
(tp=8, ep=8) failed: ..." is what a user sees.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import msgspec

from scoville.errors import UserError

_REPR_LIMIT = 120


def describe_item(item: Any) -> str:
    """A short, readable rendering of an item for error messages."""
    try:
        text = repr(msgspec.to_builtins(item)) if isinstance(item, msgspec.Struct) else repr(item)
    except Exception:  # an item whose repr fails still deserves an error message
        text = f"<{type(item).__name__}>"
    return text if len(text) <= _REPR_LIMIT else text[: _REPR_LIMIT - 3] + "..."


class TaskError(Exception):
    """One item's task failed; ``index`` and ``item`` say which, ``cause`` is the original error."""

    def __init__(self, index: int, item: Any, cause: BaseException | str) -> None:
        self.index = index
        self.item = item
        self.cause = cause
        detail = cause if isinstance(cause, str) else f"{type(cause).__name__}: {cause}"
        super().__init__(f"item {index} ({describe_item(item)}) failed: {detail}")


class TaskUserError(TaskError, UserError):
    """A task failed because of the user's input; the CLI prints it as one line."""


def task_error(index: int, item: Any, cause: BaseException | str) -> TaskError:
    """The right TaskError for ``cause``: a user error stays a user error across the process boundary."""
    if isinstance(cause, UserError):
        return TaskUserError(index, item, cause)
    return TaskError(index, item, cause)


class TaskResult(msgspec.Struct, frozen=True):
    """The outcome of one item: ``value`` when it succeeded, ``error`` when it did not."""

    index: int
    value: Any = None
    error: TaskError | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


class Executor(abc.ABC):
    """Runs ``fn(item)`` for each item somewhere (local processes, Ray tasks)."""

    kind: str = "abstract"

    @abc.abstractmethod
    def submit(self, fn: Callable[[Any], Any], items: Iterable[Any]) -> Iterator[TaskResult]:
        """Start every item and yield a TaskResult for each as it completes (completion order).

        Failures are yielded, not raised, so a progress display can count them;
        closing the iterator early cancels what has not started.
        """

    def map(self, fn: Callable[[Any], Any], items: Iterable[Any]) -> list[Any]:
        """``[fn(item) for item in items]``, computed by the backend, in item order.

        Fails fast: the first failure to complete is raised as its TaskError and
        the items not yet started are cancelled (no point finishing a search
        whose result cannot be used).
        """
        items = list(items)
        out: list[Any] = [None] * len(items)
        stream = self.submit(fn, items)
        try:
            for result in stream:
                if result.error is not None:
                    raise result.error
                out[result.index] = result.value
        finally:
            close = getattr(stream, "close", None)
            if close is not None:
                close()
        return out

    def close(self) -> None:  # noqa: B027 - a no-op by default, not abstract: a backend without resources keeps it
        """Release the backend's resources (processes, cluster connection)."""

    def describe(self) -> dict[str, Any]:
        """What ran the work, for manifests."""
        return {"kind": self.kind}

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
