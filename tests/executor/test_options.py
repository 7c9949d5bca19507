"""The shared --executor / --ray-address flags parse and fail like the rest of the CLI."""

from __future__ import annotations

import typer
from typer.testing import CliRunner

from scoville.cli.executor_options import ExecutorOption, RayAddressOption
from scoville.errors import UserError
from scoville.executor import make_executor


def _app() -> typer.Typer:
    app = typer.Typer()

    @app.command()
    def fan(executor: ExecutorOption = "local", ray_address: RayAddressOption = None) -> None:
        ex = make_executor(executor, ray_address)
        print(ex.kind, ex.map(abs, [-2, 3]))
        ex.close()

    return app


def test_local_is_the_default():
    result = CliRunner().invoke(_app(), [])
    assert result.exit_code == 0 and result.stdout.strip() == "local [2, 3]"


def test_ray_address_without_ray_executor_is_refused():
    result = CliRunner().invoke(_app(), ["--ray-address", "10.1.2.3:6379"])
    assert isinstance(result.exception, UserError) and "only applies with --executor ray" in str(result.exception)


def test_ray_address_comes_from_the_environment(monkeypatch):
    app = typer.Typer()

    @app.command()
    def where(executor: ExecutorOption = "local", ray_address: RayAddressOption = None) -> None:
        print(executor, ray_address)

    monkeypatch.setenv("RAY_ADDRESS", "10.9.8.7:6379")
    assert CliRunner().invoke(app, ["--executor", "ray"]).stdout.strip() == "ray 10.9.8.7:6379"
    assert CliRunner().invoke(app, ["--executor", "ray", "--ray-address", "auto"]).stdout.strip() == "ray auto"
