"""The ``--executor`` / ``--ray-address`` flags, declared once for every command that fans work out.

Why here: ``sweep``, ``run``, ``simulate`` and the config search must spell and
explain these flags identically; a command adds ``executor: ExecutorOption =
"local"`` and ``ray_address: RayAddressOption = None`` to its signature and
calls ``make_executor(executor, ray_address)`` (or, for measured load,
``RayLoadCoordinator(..., ray_address=ray_address)``).
"""

from __future__ import annotations

from typing import Annotated

import typer

ExecutorOption = Annotated[str, typer.Option(
    "--executor", rich_help_panel="Execution",
    help="Where work runs: local (worker processes here) | ray (a Ray cluster).")]
RayAddressOption = Annotated[str | None, typer.Option(
    "--ray-address", rich_help_panel="Execution", envvar="RAY_ADDRESS",
    help="Ray cluster to join with --executor ray: HOST:6379 of `ray start --head`, or 'auto'. "
         "Default: RAY_ADDRESS, else a cluster started on this machine, else a new local one.")]
ClientWorkersOption = Annotated[int, typer.Option(
    "--ray-workers", rich_help_panel="Execution", min=1,
    help="Client workers (Ray actors, spread over nodes) that send the load.")]
