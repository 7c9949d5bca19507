"""Serve the emulator until told to stop: the body of ``scoville serve`` and ``python -m scoville.emulator``.

When it is listening it prints one JSON line on stdout,
``{"scoville_emulator": "ready", "url": ..., "port": ...}``, which is how
:func:`scoville.emulator.launch.spawn_emulator` learns the port it got with
``--port 0``. SIGINT and SIGTERM stop it cleanly.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import logging
import os
import signal
import sys
from collections.abc import Callable

from scoville.emulator.server import Emulator, start_site
from scoville.errors import UserError

API_KEY_ENV = "SCOVILLE_EMULATOR_API_KEY"


def raise_priority() -> str:
    """Run the pacing loop at nice -20 so other processes on a busy host rarely take its core.

    Not SCHED_FIFO: the loop spins near events (see scoville.emulator.realtime),
    and Linux throttles a real-time task that runs more than 95% of a second for
    the rest of it ("sched: RT throttling activated"), a ~50 ms stall. Measured
    (bench/bench_emulator_pacing.py, 64 streams x 2 ms, paired runs): p99 lag
    4.6-16.6 ms under SCHED_FIFO against 1.4-1.5 ms at normal priority. For the
    same reason do not start the emulator under ``chrt``. Needs root or
    CAP_SYS_NICE; returns what was obtained, or "normal" with a warning.
    """
    try:
        os.nice(-20)
        return "nice -20"
    except (AttributeError, PermissionError, OSError):
        print("warning: could not raise the emulator's priority (needs root or CAP_SYS_NICE); "
              "pacing may suffer on a busy host", file=sys.stderr)
        return "normal"


class OneLineFormatter(logging.Formatter):
    """A log record, and the exception it carries, on one line.

    A server logs what it cannot answer; a 30-line traceback for each client
    that hangs up buries the one line that matters. The exception's type and
    first line are kept, its traceback is not.
    """

    def format(self, record: logging.LogRecord) -> str:
        text = f"{record.levelname.lower()}: {record.name}: {record.getMessage()}"
        exc = record.exc_info[1] if record.exc_info else None
        if exc is not None:
            text += f" ({type(exc).__name__}: {(str(exc).splitlines() or [''])[0]})"
        return text.replace("\n", " ")


def quiet_logging() -> None:
    """Warnings and errors of every logger (aiohttp's, asyncio's, the emulator's) as one line each on stderr."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(OneLineFormatter())
    root = logging.getLogger()
    root.handlers = [handler]
    root.setLevel(logging.WARNING)


def use_uvloop() -> bool:
    """Prefer uvloop when installed: lower per-request overhead on the event loop."""
    try:
        import uvloop
    except ImportError:
        return False
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    return True


async def serve_async(emu: Emulator, host: str, port: int, announce: Callable[[str, int], None]) -> None:
    try:
        runner, bound = await start_site(emu, host, port)
    except OSError as e:
        raise UserError(f"cannot listen on {host}:{port} ({e.strerror}); "
                        "pick another --port or free that one") from None
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    url = f"http://{host}:{bound}"
    announce(url, bound)
    try:
        await stop.wait()
    finally:
        await runner.cleanup()


def announce_json(url: str, port: int) -> None:
    print(json.dumps({"scoville_emulator": "ready", "url": url, "port": port}), flush=True)


def serve(emu: Emulator, host: str = "127.0.0.1", port: int = 8000,
          announce: Callable[[str, int], None] = announce_json, *, uvloop: bool = False) -> None:
    """Block serving ``emu`` on ``host:port`` until SIGINT/SIGTERM."""
    if not 0 <= port <= 65535:  # the OS would take 70000 as 70000 % 65536 and serve somewhere unexpected
        raise UserError(f"--port {port} is not a TCP port; use 1-65535, or 0 for a free one")
    quiet_logging()
    if uvloop:
        use_uvloop()
    # A full cyclic-GC pass over the catalogs, numpy and aiohttp objects built at start-up takes
    # milliseconds, all of it on the loop that paces tokens: freeze them out of the collector.
    gc.collect()
    gc.freeze()
    asyncio.run(serve_async(emu, host, port, announce))


def _config_arg(value: str | None) -> dict | str | None:
    """``--config``: inline JSON when it starts with '{', else a file path (UserError on bad inline JSON)."""
    if not value or not value.lstrip().startswith("{"):
        return value
    try:
        return json.loads(value)
    except json.JSONDecodeError as e:
        raise UserError(f"--config: inline JSON is not valid ({e.msg} at character {e.pos}); "
                        "pass a JSON object or a YAML/JSON file path") from None


def main(argv: list[str] | None = None) -> None:
    """``python -m scoville.emulator``: the child process that spawn_emulator starts."""
    from scoville.emulator.build import build_emulator, pinned_config

    p = argparse.ArgumentParser(prog="python -m scoville.emulator",
                                description="Serve the emulator until SIGINT/SIGTERM (the child that spawn_emulator "
                                            "starts); prints a JSON ready line with the port on stdout.")
    p.add_argument("--hardware")
    p.add_argument("--model")
    p.add_argument("--config", help="SimConfig as a YAML/JSON file, or inline JSON starting with '{'")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--api-key", default=os.environ.get(API_KEY_ENV),
                   help=f"require this bearer key (default: ${API_KEY_ENV}, which keeps it out of `ps`)")
    p.add_argument("--max-queue", type=int)
    p.add_argument("--served-model-name")
    p.add_argument("--uvloop", action="store_true")
    p.add_argument("--high-priority", "--realtime-priority", dest="high_priority", action="store_true",
                   help="run at nice -20 (root or CAP_SYS_NICE) so other processes on a busy host rarely delay tokens")
    p.add_argument("--spin-horizon-ms", type=float, default=5.0,
                   help="keep a core busy while the next token is this close; 0 never spins")
    p.add_argument("--reasoning-tokens", type=int, default=0,
                   help="stream the first N output tokens of each chat answer as reasoning_content")
    args = p.parse_args(argv)
    if args.high_priority:
        raise_priority()
    try:
        config = _config_arg(args.config)
        cfg = pinned_config(args.hardware, args.model, config)
        emu = build_emulator(cfg, served_model_name=args.served_model_name, api_key=args.api_key,
                             max_queue=args.max_queue, spin_horizon_s=args.spin_horizon_ms / 1e3,
                             reasoning_tokens=args.reasoning_tokens)
        serve(emu, args.host, args.port, uvloop=args.uvloop)
    except UserError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
