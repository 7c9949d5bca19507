"""``scoville serve``: the simulator behind a real OpenAI-compatible HTTP server."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

console = Console(stderr=True)


def register(app: typer.Typer) -> None:
    @app.command("serve")
    def serve_cmd(
        hardware: Annotated[str, typer.Option("--hardware", help="System from the catalog (h200, gb300, ...) "
                                              "or a hardware YAML.")] = "h200",
        model: Annotated[str, typer.Option("--model", help="Model from the catalog or an HF config.json.")]
        = "llama-3.1-8b",
        config: Annotated[Path | None, typer.Option("--config", help="SimConfig YAML/JSON pinning the "
                                                       "serving configuration.")] = None,
        framework: Annotated[str | None, typer.Option("--framework", help="Serving stack whose kernels and "
                                                         "host costs to emulate: vllm | sglang | trtllm.")] = None,
        profile: Annotated[Path | None, typer.Option("--profile", help="Calibration profile from "
                                                        "`scoville calibrate`.")] = None,
        host: Annotated[str, typer.Option("--host")] = "127.0.0.1",
        port: Annotated[int, typer.Option("--port", help="0 picks a free port.")] = 8000,
        api_key: Annotated[str | None, typer.Option("--api-key", envvar="SCOVILLE_EMULATOR_API_KEY",
                                                       help="Require 'Authorization: Bearer KEY'.")] = None,
        max_queue: Annotated[int | None, typer.Option("--max-queue", help="Answer 429 once this many "
                                                         "requests wait to be scheduled.")] = None,
        served_model_name: Annotated[str | None, typer.Option("--served-model-name",
                                                                 help="Model name clients must send.")] = None,
        high_priority: Annotated[bool, typer.Option("--high-priority", "--realtime-priority",
                                                    help="Run at nice -20 (root) so other processes on a busy "
                                                         "host rarely delay tokens.")] = False,
        spin_horizon_ms: Annotated[float, typer.Option("--spin-horizon-ms", help="Keep a core busy while the "
                                                       "next token is this close (sub-ms pacing where idle cores "
                                                       "wake late, e.g. VMs); 0 never spins.")] = 5.0,
        reasoning_tokens: Annotated[int, typer.Option("--reasoning-tokens", help="Stream the first N output "
                                                      "tokens of each chat answer as reasoning_content, as a "
                                                      "reasoning model does.")] = 0,
    ) -> None:
        """Serve the simulated system on /v1/completions and /v1/chat/completions, paced in real time."""
        from scoville.emulator.build import build_emulator, pinned_config
        from scoville.emulator.run import announce_json, raise_priority, serve

        cfg = pinned_config(hardware, model, config, framework=framework, profile=profile)
        emu = build_emulator(cfg, served_model_name=served_model_name, api_key=api_key, max_queue=max_queue,
                             spin_horizon_s=spin_horizon_ms / 1e3, reasoning_tokens=reasoning_tokens)
        priority = raise_priority() if high_priority else "normal"

        def announce(url: str, bound: int) -> None:
            console.print(f"[bold green]scoville emulator[/] serving [bold]{emu.opts.served_model_names[0]}[/] "
                          f"on {cfg.hardware} ({cfg.label()}) at {url}, {priority} priority  (Ctrl-C stops)")
            announce_json(url, bound)

        serve(emu, host, port, announce, uvloop=True)
