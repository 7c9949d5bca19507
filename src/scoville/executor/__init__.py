"""Where independent work runs: this machine's cores (default) or a Ray cluster.

``make_executor("local" | "ray", ray_address)`` is what the CLIs call for
``--executor local|ray --ray-address ADDR``. Importing this package never
imports Ray; only using a RayExecutor does.

The executor knows nothing of what it runs: the simulator maps its points over one it is handed
(``scoville.sim.fanout``), and the client's Ray workers (``scoville.client.ray_pool``) use its connection,
clock sync and point split. Neither is imported from here, so both can build on this package.
"""

from __future__ import annotations

from scoville.errors import UserError
from scoville.executor.base import Executor, TaskError, TaskResult, TaskUserError
from scoville.executor.local import LocalExecutor
from scoville.executor.ray_executor import RayExecutor, RayUnavailableError

EXECUTOR_KINDS = ("local", "ray")

__all__ = [
    "EXECUTOR_KINDS",
    "Executor",
    "LocalExecutor",
    "RayExecutor",
    "RayUnavailableError",
    "TaskError",
    "TaskResult",
    "TaskUserError",
    "make_executor",
]


def make_executor(kind: str = "local", ray_address: str | None = None, *, max_workers: int | None = None) -> Executor:
    """The executor named on the command line; bad combinations are one-line UserErrors."""
    kind = (kind or "local").strip().lower()
    if kind not in EXECUTOR_KINDS:
        raise UserError(f"unknown --executor {kind!r}; use local or ray")
    if kind == "local":
        if ray_address:
            raise UserError("--ray-address only applies with --executor ray")
        return LocalExecutor(max_workers)
    return RayExecutor(ray_address or None)
