"""``scoville calibrate``: fit a hardware entry's free parameters on measured runs and write a profile.

Thin: resolves the runs, reads an optional deployment config, calls ``scoville.sim.calibrate.calibrate``,
prints every point's error before and after (fit points and held-out points marked) and where the profile
went. ``scoville simulate --profile`` / ``serve --profile`` then use it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from scoville.errors import UserError
from scoville.results.catalog import resolve_run
from scoville.sim.calibrate import PARAMS, CalibrationReport, calibrate
from scoville.sim.measured import METRICS
from scoville.sim.profile import Profile

console = Console()
err_console = Console(stderr=True)
UNITS = {"kernel_factor": "×", "prefill_kernel_factor": "×", "step_overhead_us": "µs", "seq_overhead_us": "µs",
         "request_overhead_ms": "ms"}


def parse_labels(text: str | None) -> list[str] | None:
    """``--fit-points c=1,c=8`` (or ``RUN:c=1,...``) into labels; empty = fit on every point."""
    if text is None:
        return None
    labels = [x.strip() for x in text.split(",") if x.strip()]
    if not labels:
        raise UserError("--fit-points names no point; give labels such as c=1,c=8 (or RUN:c=1)")
    return labels


def _pct(e: float | None) -> str:
    if e is None:
        return "–"
    text = f"{e:+.0%}" if abs(e) >= 0.1 else f"{e:+.1%}"
    return f"[red]{text}[/]" if abs(e) > 0.15 else text


def errors_table(report: CalibrationReport) -> Table:
    """One row per point: measured TTFT/TPOT/throughput (± the standard error of their passes' mean, with repeats)
    and each one's error before → after."""
    table = Table(title="prediction error per point (predicted ÷ measured − 1): uncalibrated → calibrated",
                  header_style="bold")
    for col, justify in (("run", "left"), ("workload", "left"), ("point", "left"), ("role", "left"),
                         ("TTFT ms", "right"), ("TTFT err", "right"), ("TPOT ms", "right"), ("TPOT err", "right"),
                         ("tok/s", "right"), ("tok/s err", "right")):
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    for p in report.points:
        m = p.measured
        cells = [escape(p.run_id[-6:]), escape(p.workload), escape(p.label),
                 "[bold]fit[/]" if p.role == "fit" else "held-out"]
        for (name, _), value, scale in zip(METRICS, (m.ttft_s, m.tpot_s, m.total_tok_s), (1e3, 1e3, 1.0), strict=True):
            rse = p.measured_rse.get(name)
            spread = f" ±{rse:.0%}" if rse is not None else ""
            cells.append("–" if value is None else f"{value * scale:,.4g}{spread}")
            cells.append(f"{_pct(p.error('before', name))} → {_pct(p.error('after', name))}")
        table.add_row(*cells)
    return table


def parameters_table(report: CalibrationReport) -> Table:
    table = Table(title="fitted parameters", header_style="bold")
    for col in ("parameter", "prior", "fitted", "spread (1 sd)"):
        table.add_column(col, justify="left" if col == "parameter" else "right")
    for k in PARAMS:
        sd = report.fit.spread.get(k)
        spread = "–" if sd is None else ("> ×10" if sd > 2.3 else f"±{sd:.0%}")
        prior = f"{report.prior[k]:,.4g} {UNITS[k]}" + report.prior_width(k)
        table.add_row(k, prior, f"{report.fitted[k]:,.4g} {UNITS[k]}", spread)
    return table


def summary_lines(report: CalibrationReport, profile: Profile) -> list[str]:
    out = []
    for role in ("fit", "held-out"):
        before, after = report.max_abs_error("before", role), report.max_abs_error("after", role)
        if after is not None:
            out.append(f"{role} points: worst error {before:.0%} uncalibrated → {after:.1%} calibrated")
    for f in report.side_figures():
        out.append(f"{f.name} at {f.point.label} of {f.point.workload} ({f.point.role}): measured "
                   f"{f.measured * 1e3:.3g} ms, uncalibrated {f.before * 1e3:.3g} → calibrated {f.after * 1e3:.3g}")
    out.append(f"residual spread (the profile's sigma): {profile.sigma:.3f} in log space; "
               f"{report.fit.evaluations} simulations")
    return out


def register(app: typer.Typer) -> None:
    @app.command("calibrate")
    def calibrate_cmd(
        run_refs: Annotated[list[str], typer.Argument(metavar="RUN...", help="Measured runs (paths, ids or "
                                                      "'latest') of one model on one deployment.", show_default=False)],
        hardware: Annotated[str, typer.Option(help="Hardware entry the runs were measured on (catalog name or "
                                                   "YAML path).")],
        model: Annotated[str | None, typer.Option(help="Model (catalog name or config.json path); default: the "
                                                          "runs' model.")] = None,
        framework: Annotated[str, typer.Option(
            help="Serving stack the runs measured: vllm | sglang | trtllm.")] = "vllm",
        fit_points: Annotated[str | None, typer.Option("--fit-points", help="Points to fit on, e.g. c=1,c=8 or "
                                                          "RUN:c=4 (default: all; the rest are held out).")] = None,
        config: Annotated[Path | None, typer.Option(help="The measured deployment's SimConfig (YAML/JSON): "
                                                            "max_num_seqs, max_num_batched_tokens, parallel, "
                                                            "kv_capacity_tokens...")] = None,
        output: Annotated[Path, typer.Option("-o", "--output", help="Profile file to write.")] = Path("profile.yaml"),
        max_evals: Annotated[int, typer.Option("--max-evals", min=20, help="Most simulations the fit may run.")] = 400,
        runs: Annotated[Path, typer.Option("--runs", help="Folder holding run directories.")] = Path("runs"),
    ) -> None:
        """Fit the kernel factors and the serving stack's host costs on measured runs; write a versioned
        profile."""
        dirs = [resolve_run(runs, r) for r in run_refs]
        with err_console.status("calibrating…") as status:
            def progress(n: int, best: float) -> None:
                status.update(f"calibrating: {n} simulations, best loss {best:.4g}")

            profile, report = calibrate(dirs, hardware, model=model, framework=framework,
                                        fit_points=parse_labels(fit_points), config=config, max_evals=max_evals,
                                        progress=progress)
        path = profile.write(output)
        console.print(errors_table(report))
        console.print(parameters_table(report))
        for line in summary_lines(report, profile):
            console.print(escape(line))
        for note in report.notes():
            console.print(f"[yellow]note:[/] {escape(note)}")
        console.print(f"profile written to [bold]{escape(str(path))}[/] (use it with `scoville simulate --profile "
                      f"{escape(str(path))}`)")
