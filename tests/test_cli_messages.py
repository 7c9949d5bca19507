"""A one-line error reaches the terminal as written and names the real cause: square brackets (pip extras) are
text, not Rich markup. Both run ``scoville.cli.main`` in this process, as the console script calls it."""

from __future__ import annotations

import pytest

from scoville.cli import main


def test_an_error_quoting_a_pip_extra_keeps_its_brackets(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "1000")
    with pytest.raises(SystemExit) as e:
        main(["simulate", "--hardware", "mi355x", "--model", "llama-3.1-8b", "--cost-backend", "measured",
              "--scenario", "1k1k", "--runs", str(tmp_path)])
    err = " ".join(capsys.readouterr().err.split())   # however the console wrapped it
    assert e.value.code == 2
    assert "pip install 'scoville[silicon]'" in err, err
    assert "does not fit" not in err       # the search used to read the missing tables as "no layout fits"


def test_a_model_in_fp32_on_a_chip_without_an_fp32_rate_names_the_field_not_a_layout(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "1000")
    with pytest.raises(SystemExit) as e:
        main(["simulate", "--hardware", "h100", "--model", "llama-3.1-8b", "--precision", "fp32",
              "--scenario", "1k1k", "--runs", str(tmp_path)])
    err = " ".join(capsys.readouterr().err.split())
    assert e.value.code == 2
    assert "add flops_tflops.fp32" in err and "does not fit" not in err, err


def test_sweep_help_fits_an_80_column_terminal_without_cutting_an_option_name(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")    # typer's help console reads it when it renders
    main(["sweep", "--help"])
    lines = capsys.readouterr().out.splitlines()
    assert max(len(line) for line in lines) <= 80
    names = [line.split()[1] for line in lines if line.startswith("│ --")]
    assert "--url" in names and "--no-ignore-eos" in names and not any(n.endswith("…") for n in names)
    assert {"Target", "Workload", "Load", "Power and cost", "Output", "Execution"} <= {
        line.strip("╭─╮ ").strip() for line in lines if line.startswith("╭─")}


def test_simulate_deployment_table_on_an_80_column_terminal_keeps_every_band_whole(tmp_path, capsys, monkeypatch):
    """The deployment label wraps; the point, GPU count and the bands never collapse to an ellipsis."""
    monkeypatch.setenv("COLUMNS", "80")
    main(["simulate", "--hardware", "h200", "--model", "llama-3.1-8b", "--scenario", "1k1k", "--runs", str(tmp_path)])
    out = capsys.readouterr().out        # the tables (the notes below them go to stderr)
    table = out[out.index("deployment of each point"):]
    rows = [line for line in table.splitlines() if line.startswith("│ c=")]
    assert rows and max(len(line) for line in table.splitlines() if line[:1] in "┏┃┡│└") <= 80
    assert "…" not in table
    for row in rows:     # point, GPUs and three "low-high" bands, each whole
        cells = [c.strip() for c in row.strip("│").split("│")]
        assert cells[0].startswith("c=") and cells[2].isdigit(), row
        assert all("-" in c for c in cells[3:]), row
