"""The CLI imports only the invoked command's module, so its command table must match what modules register."""

from __future__ import annotations

import importlib
import subprocess
import sys

import typer

from scoville.cli import COMMANDS


def test_the_command_table_names_every_command_with_the_module_that_registers_it():
    registered: dict[str, str] = {}
    for module in dict.fromkeys(COMMANDS.values()):
        app = typer.Typer()
        importlib.import_module(f"scoville.cli.{module}").register(app)
        for info in app.registered_commands:
            registered[info.name] = module
    assert registered == COMMANDS


def test_a_simulate_command_line_does_not_import_the_http_client_or_the_catalog():
    code = ("import sys; from scoville import cli; cli._register(['simulate', '--help']); "
            "print(sorted(m for m in ('aiohttp', 'pandas', 'scoville.results.catalog', 'scoville.client') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "[]"
