"""The ``scoville`` command: a thin Typer app; each command group lives in its own module.

Commands parse options, call the library and print. Errors a user can cause
(``UserError``) end in one red line naming what went wrong and how to fix it.
"""

from __future__ import annotations

import importlib
import sys

import typer
from rich.console import Console
from rich.markup import escape

from scoville.errors import UserError

app = typer.Typer(
    name="scoville",
    help="Measure, predict and compare LLM inference latency-throughput-energy frontiers.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
err_console = Console(stderr=True)


# Every command: the module that defines it, and its one-line help as `scoville --help` lists it, in that order.
# A command line imports only its command's module (`scoville simulate` never pays for the HTTP client, pandas or
# the catalog), and `scoville --help` imports none: it lists this table. tests/test_cli_registry.py keeps the table
# equal to what the modules register.
COMMANDS: dict[str, tuple[str, str]] = {
    "sweep": ("measure_cmd", "Measure a latency-throughput curve: closed-loop concurrency or open-loop rate points."),
    "run": ("measure_cmd", "Measure one load point (one --concurrency or one --rate)."),
    "simulate": ("simulate_cmd", "Predict the latency-throughput-energy frontier of a model on a system (searches "
                                 "deployments unless --config)."),
    "serve": ("serve_cmd", "Serve the simulated system on /v1/completions and /v1/chat/completions, paced in real "
                           "time."),
    "compare": ("compare_cmd", "Peak throughput, highest tok/s/user, lowest TTFT/E2E and iso-interactivity "
                               "throughput, with ratios."),
    "report": ("compare_cmd", "One self-contained HTML report (opens offline) with frontiers, comparison, "
                              "latencies, power, manifests."),
    "scenarios": ("workload_cmd", "List the named workloads (--scenario NAME), or one scenario's parameters."),
    "trace-info": ("workload_cmd", "Validate a trace and summarise it (sessions, requests, lengths, span)."),
    "export-trace": ("workload_cmd", "Freeze a session scenario into a scoville JSONL trace (to inspect, edit or "
                                     "replay it)."),
    "sessions": ("workload_cmd", "Session and prefix-cache metrics of a run: per point, and per turn (TTFT, hit "
                                 "rate)."),
    "ls": ("runs_cmd", "List the runs under --runs."),
    "show": ("runs_cmd", "Show one run's manifest summary and per-point metrics."),
    "sql": ("runs_cmd", "Plain SQL over the catalog (read-only): tables runs, points, requests, power."),
    "recompute": ("runs_cmd", "Rebuild every metric of a run from its raw request and power records, or "
                              "re-derive them under another tool's conventions (docs/conventions.md)."),
    "calibrate": ("calibrate_cmd", "Fit the kernel factors and the serving stack's host costs on measured runs; "
                                   "write a versioned profile."),
    "hardware": ("hardware_cmd", "List the systems the simulator knows, or one system's figures, kernel pricing and "
                                 "sources."),
}


@app.callback()
def _group() -> None:
    """Keeps the app a group of commands even when only the invoked command's module is registered."""


def _listed() -> None:
    """Stands for a command in the listing; never runs (a command line that names it registers the real one)."""


def _register(argv: list[str]) -> None:
    first = next((a for a in argv if not a.startswith("-")), None)
    if first in COMMANDS:
        importlib.import_module(f"scoville.cli.{COMMANDS[first][0]}").register(app)
        return
    for name, (_, text) in COMMANDS.items():   # the listing, or click's "No such command" with the names
        app.command(name, help=text)(_listed)


def main(argv: list[str] | None = None) -> None:
    _register(sys.argv[1:] if argv is None else argv)
    try:
        code = app(args=argv, standalone_mode=False)
    except UserError as e:
        err_console.print(f"[bold red]error:[/] {escape(str(e))}")   # messages quote extras: 'scoville[ray]'
        sys.exit(2)
    except KeyboardInterrupt:
        err_console.print("[yellow]interrupted[/]: everything recorded so far is kept on disk")
        sys.exit(130)
    except typer.Exit as e:
        sys.exit(e.exit_code)
    except Exception as e:
        # Usage errors (unknown command, bad option) come from typer's click, which newer typer
        # versions vendor; recognise them by shape rather than by one module's class.
        show, exit_code = getattr(e, "show", None), getattr(e, "exit_code", None)
        if callable(show) and isinstance(exit_code, int):
            show()
            sys.exit(exit_code)
        if type(e).__name__ == "Abort":
            err_console.print("[yellow]aborted[/]")
            sys.exit(130)
        raise
    # Typer turns a KeyboardInterrupt into exit code 130 and, without standalone mode, returns it
    # instead of exiting: dropping it made Ctrl-C exit 0.
    if isinstance(code, int) and code:
        if code == 130:
            err_console.print("[yellow]interrupted[/]: everything recorded so far is kept on disk")
        sys.exit(code)
