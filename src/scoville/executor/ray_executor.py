"""Ray tasks: the same work fanned out across a cluster.

Ray is an optional extra, so nothing here imports it at module level: the
import happens in :func:`ray_module` when a RayExecutor is first used, and a
missing install or an unreachable cluster is a one-line UserError saying
what to run. ``ray.init`` is called lazily and only if this process is not
already connected (a test session or a user script may have connected
first; we never shut down a connection we did not open).
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterable, Iterator
from types import ModuleType
from typing import Any

from scoville.errors import UserError
from scoville.executor.base import Executor, TaskResult, task_error

INSTALL_HINT = "pip install 'scoville[ray]'"


class RayUnavailableError(UserError):
    """Ray is not installed or the cluster cannot be reached."""


def ray_module() -> ModuleType:
    """``import ray``, or a UserError saying how to install it."""
    try:
        import ray
    except ImportError as e:
        raise RayUnavailableError(f"--executor ray needs Ray, which is not installed: {INSTALL_HINT}") from e
    return ray


def check_reachable(address: str | None, timeout_s: float = 3.0) -> None:
    """Fail in seconds, not minutes, when ``HOST:PORT`` has nothing listening.

    Ray retries an unreachable GCS for minutes before giving up; a plain TCP
    connect tells the common mistakes (wrong address, cluster not started)
    apart at once. ``auto``, ``ray://`` client addresses and None are left to Ray.
    """
    if not address or address == "auto" or "://" in address or ":" not in address:
        return
    host, _, port = address.rpartition(":")
    if host.startswith("[") and host.endswith("]"):  # [IPv6]:PORT
        host = host[1:-1]
    try:
        with socket.create_connection((host, int(port)), timeout=timeout_s):
            return
    except ValueError:
        raise RayUnavailableError(f"--ray-address {address!r} is not HOST:PORT (e.g. 10.0.0.5:6379)") from None
    except OSError as e:
        raise RayUnavailableError(
            f"no Ray cluster answers at {address} ({e.strerror or e}); start one there with "
            "`ray start --head --port=6379`, or fix --ray-address") from None


def connect(address: str | None) -> tuple[ModuleType, bool]:
    """Connect this process to Ray once; returns the module and whether *we* started the connection.

    ``address=None`` joins ``RAY_ADDRESS`` or a cluster started on this machine
    by ``ray start``, else starts a local one (Ray's own rules).
    """
    ray = ray_module()
    if ray.is_initialized():
        return ray, False
    check_reachable(address)
    try:
        ray.init(address=address, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True)
    except (ConnectionError, RuntimeError, ValueError) as e:
        where = f"at {address}" if address else "(no --ray-address given)"
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise RayUnavailableError(
            f"cannot connect to a Ray cluster {where}: {first}; start one with `ray start --head` "
            "and pass --ray-address HOST:6379 (or 'auto')"
        ) from e
    return ray, True


def unwrap_ray_error(ray: ModuleType, exc: BaseException) -> BaseException | str:
    """The user's original exception inside Ray's wrapper, or a sentence for infrastructure failures."""
    if isinstance(exc, ray.exceptions.RayTaskError):
        cause = getattr(exc, "cause", None)
        return cause if isinstance(cause, BaseException) else str(exc).strip().splitlines()[-1]
    if isinstance(exc, ray.exceptions.TaskCancelledError):
        return "cancelled"
    if isinstance(exc, (ray.exceptions.WorkerCrashedError, ray.exceptions.NodeDiedError)):
        return f"the Ray worker running it died ({type(exc).__name__})"
    return exc


def _call(fn: Callable[[Any], Any], item: Any) -> Any:
    """The one Ray task: apply ``fn`` (any callable, builtins included) to ``item``."""
    return fn(item)


class RayExecutor(Executor):
    """One Ray task per item (``num_cpus`` each); results fetched as they complete."""

    kind = "ray"

    def __init__(self, address: str | None = None, *, num_cpus: float = 1.0) -> None:
        self.address = address
        self.num_cpus = num_cpus
        self._ray: ModuleType | None = None
        self._owns_connection = False
        self._trampoline: Any = None

    @property
    def ray(self) -> ModuleType:
        if self._ray is None:
            self._ray, self._owns_connection = connect(self.address)
        return self._ray

    def submit(self, fn: Callable[[Any], Any], items: Iterable[Any]) -> Iterator[TaskResult]:
        items = list(items)
        ray = self.ray
        if self._trampoline is None:
            self._trampoline = ray.remote(num_cpus=self.num_cpus, max_retries=0)(_call)
        # Put fn once: a search's partial(evaluate_candidate, workload=...) is shipped
        # to the object store a single time, not once per candidate.
        fn_ref = ray.put(fn)
        refs = {self._trampoline.remote(fn_ref, item): i for i, item in enumerate(items)}
        return self._collect(ray, refs, items)

    @staticmethod
    def _collect(ray: ModuleType, refs: dict[Any, int], items: list[Any]) -> Iterator[TaskResult]:
        pending = list(refs)
        try:
            while pending:
                done, pending = ray.wait(pending, num_returns=1)
                for ref in done:
                    i = refs[ref]
                    try:
                        value = ray.get(ref)
                    except Exception as e:
                        yield TaskResult(i, error=task_error(i, items[i], unwrap_ray_error(ray, e)))
                    else:
                        yield TaskResult(i, value=value)
        finally:
            for ref in pending:
                ray.cancel(ref)

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "address": self.address}
        if self._ray is not None:
            out["cluster_cpus"] = self._ray.cluster_resources().get("CPU")
            out["nodes"] = sum(1 for n in self._ray.nodes() if n.get("Alive"))
        return out

    def close(self) -> None:
        self._trampoline = None
        if self._ray is not None and self._owns_connection:
            self._ray.shutdown()
        self._ray = None
        self._owns_connection = False
