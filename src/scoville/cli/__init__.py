"""The ``scoville`` command: a thin Typer app; each command group lives in its own module.

Commands parse options, call the library and print. Errors a user can cause
(``UserError``) end in one red line naming what went wrong and how to fix it.
"""

from __future__ import annotations

import importlib
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


# Every command and the module that defines it, in the order `scoville --help` lists them. A command line
# imports only its command's module: `scoville simulate` never pays for the HTTP client, pandas or the
# catalog (tests/cli/test_cli_registry.py keeps this table equal to what the modules register).
COMMANDS = {
    "sweep": "measure_cmd", "run": "measure_cmd", "simulate": "simulate_cmd", "serve": "serve_cmd",
    "compare": "compare_cmd", "report": "compare_cmd", "scenarios": "workload_cmd", "trace-info": "workload_cmd",
    "export-trace": "workload_cmd", "sessions": "workload_cmd", "ls": "runs_cmd", "show": "runs_cmd",
    "sql": "runs_cmd", "recompute": "runs_cmd", "calibrate": "calibrate_cmd",
}


@app.callback()
def _group() -> None:
    """Keeps the app a group of commands even when only the invoked command's module is registered."""


def _register(argv: list[str]) -> None:
    first = next((a for a in argv if not a.startswith("-")), None)
    modules = [COMMANDS[first]] if first in COMMANDS else list(dict.fromkeys(COMMANDS.values()))
    for name in modules:
        importlib.import_module(f"scoville.cli.{name}").register(app)


def main(argv: list[str] | None = None) -> None:
    _register(sys.argv[1:] if argv is None else argv)
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
