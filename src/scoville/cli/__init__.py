"""The ``scoville`` command: a thin Typer app; each command group lives in its own module.

Commands parse options, call the library and print. Errors a user can cause
(``UserError``) end in one red line naming what went wrong and how to fix it.
"""

from __future__ import annotations

import sys

import typer
from rich.console import Console

from scoville.errors import UserError

app = typer.Typer(
    name="scoville",
    help="Measure, predict and compare LLM inference latency-throughput-energy frontiers.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
err_console = Console(stderr=True)


def _register() -> None:
    # Imported here so `scoville --help` stays fast and each group owns its module.
    from scoville.cli import calibrate_cmd, compare_cmd, measure_cmd, runs_cmd, serve_cmd, simulate_cmd, workload_cmd

    for module in (measure_cmd, simulate_cmd, serve_cmd, compare_cmd, workload_cmd, runs_cmd, calibrate_cmd):
        module.register(app)


def main(argv: list[str] | None = None) -> None:
    _register()
    try:
        code = app(args=argv, standalone_mode=False)
    except UserError as e:
        err_console.print(f"[bold red]error:[/] {e}")
        sys.exit(2)
    except KeyboardInterrupt:
        err_console.print("[yellow]interrupted[/]: everything recorded so far is kept on disk")
        sys.exit(130)
    except typer.Exit as e:
        sys.exit(e.exit_code)
    except Exception as e:
        # Usage errors (unknown command, bad option) come from typer's click, which newer typer
        # versions vendor; recognise them by shape rather than by one module's class.
        if callable(getattr(e, "show", None)) and isinstance(getattr(e, "exit_code", None), int):
            e.show()
            sys.exit(e.exit_code)
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
