"""``scoville hardware``: the catalog's systems, and one system's figures with where each comes from. Run through
``scoville.cli.main`` in this process, as the console script calls it."""

from __future__ import annotations

import json

import pytest

from scoville.catalog.hardware import list_hardware
from scoville.cli import main
from scoville.sim.kernels.tables import data_dir


def test_the_listing_names_every_system_and_how_its_kernels_are_priced(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    main(["hardware"])
    out = capsys.readouterr().out
    lines = {line.split("│")[1].strip(): line for line in out.splitlines() if line.startswith("│")}
    assert set(list_hardware()) <= set(lines)
    # without aiconfigurator-core's tables (no `silicon` extra) an NVIDIA part is priced by the transfer too
    assert ("tables: h200_sxm" if data_dir() is not None else "transfer") in lines["h200"]
    assert "mesh" not in lines["h200"]
    assert "transfer (own: gemm.fp8, gemm.fp8_block, moe.fp8_block)" in lines["mi300x"]
    assert "448 x8 mesh" in lines["mi300x"]
    assert "transfer" in lines["jalapeno"] and "own" not in lines["jalapeno"]


def test_one_system_shows_its_figures_factors_and_sources(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "400")
    main(["hardware", "mi355x"])
    out = capsys.readouterr().out
    assert "scaleup_topology" in out and "mesh" in out and "compute_time_factor 1" in out
    assert "own gemm.fp8_block" in out and "AITER e4048607" in out and "source: Scale-up topology mesh" in out
    main(["hardware", "mi355x", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert data["scaleup_topology"] == "mesh" and data["pricing"].startswith("transfer (own:")
    assert data["kernel_time_factors_in_force"]["gemm.nvfp4"]["sigma"] > 0


def test_an_unknown_system_is_one_line_naming_the_choices(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "1000")
    with pytest.raises(SystemExit) as e:
        main(["hardware", "h900"])
    err = capsys.readouterr().err.strip()
    assert e.value.code == 2 and "\n" not in err and "mi355x" in err
