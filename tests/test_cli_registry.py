"""The CLI imports only the invoked command's module, so its command table must match what modules register."""

from __future__ import annotations

import importlib
import inspect
import os
import subprocess
import sys

import pytest
import typer

from scoville.cli import COMMANDS


def test_the_command_table_names_every_command_with_its_module_and_the_help_it_registers():
    registered: dict[str, tuple[str, str]] = {}
    for module in dict.fromkeys(m for m, _ in COMMANDS.values()):
        app = typer.Typer()
        importlib.import_module(f"scoville.cli.{module}").register(app)
        for info in app.registered_commands:
            text = info.help or inspect.getdoc(info.callback) or ""
            registered[info.name] = (module, text.split("\n\n")[0].replace("\n", " "))
    assert registered == COMMANDS


@pytest.mark.slow   # a fresh interpreter and the whole CLI as a subprocess
def test_the_listing_imports_no_command_module_and_names_every_command():
    code = ("import sys; from scoville import cli; cli._register(['--help']); "
            "print(sorted(m for m in sys.modules if m.endswith('_cmd')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "[]"
    listing = subprocess.run([sys.executable, "-c", "from scoville.cli import main; main()", "--help"],
                             capture_output=True, text=True, timeout=60, env={**os.environ, "COLUMNS": "1000"})
    for name, (_, text) in COMMANDS.items():
        assert name in listing.stdout and text[:40] in listing.stdout


@pytest.mark.slow   # a fresh interpreter, so that nothing imported earlier hides an import
def test_a_simulate_command_line_does_not_import_the_http_client_or_the_catalog():
    code = ("import sys; from scoville import cli; cli._register(['simulate', '--help']); "
            "print(sorted(m for m in ('aiohttp', 'pandas', 'scoville.results.catalog', 'scoville.client') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "[]"
