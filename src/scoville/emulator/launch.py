"""Start the emulator in a child process and hand back where it listens.

The measuring client and the server must not share one interpreter: a GIL
shared between the load generator and the token pacer would distort both. So
``spawn_emulator`` runs ``python -m scoville.emulator --port 0`` as a child,
reads the port from its ready line, checks ``/health``, and reads the pinned
configuration and system description from ``/scoville/info``, so the handle
reports exactly what the child serves.

The child dies with its parent: a ``kill -9`` of ``scoville sweep`` runs no
cleanup, so the child asks Linux to SIGKILL it when the parent goes
(``PR_SET_PDEATHSIG``) before it imports anything, and exits at once if the
parent was already gone by then. (Elsewhere the request is a no-op.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import urllib.request
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from scoville.emulator.run import API_KEY_ENV
from scoville.errors import UserError

START_TIMEOUT_S = 60.0
# Runs the emulator module after tying the child's life to the parent's (argv[1]: the parent's pid).
_BOOTSTRAP = """\
import os, runpy, signal, sys
parent = int(sys.argv.pop(1))
try:
    import ctypes
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
except (OSError, AttributeError):
    pass
if os.getppid() != parent:
    sys.exit(0)
runpy.run_module("scoville.emulator", run_name="__main__", alter_sys=True)
"""


class EmulatorStartError(UserError):
    """The emulator child process did not come up; the message carries its stderr tail."""


@dataclass(frozen=True)
class EmulatorHandle:
    base_url: str
    model: str                  # served model name
    system: dict[str, Any]      # manifest system block
    config: dict[str, Any]      # the pinned SimConfig as a dict
    pid: int


def _drain(pipe: Any, sink: deque[str], ready: list[dict[str, Any]], event: threading.Event | None) -> None:
    for line in iter(pipe.readline, ""):
        sink.append(line.rstrip("\n"))
        if event is not None and not ready and line.startswith("{"):
            try:
                msg = json.loads(line)
            except json.JSONDecodeError:
                continue
            if msg.get("scoville_emulator") == "ready":
                ready.append(msg)
                event.set()
    if event is not None:
        event.set()
    pipe.close()


def _get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.loads(r.read() or b"null")


def _stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@contextmanager
def spawn_emulator(hardware: str = "h200", model: str = "llama-3.1-8b", config: dict[str, Any] | None = None, *,
                   api_key: str | None = None, max_queue: int | None = None,
                   served_model_name: str | None = None, high_priority: bool = False,
                   spin_horizon_ms: float | None = None, reasoning_tokens: int = 0) -> Iterator[EmulatorHandle]:
    """Run the emulator on a free 127.0.0.1 port for the duration of the ``with`` block.

    ``high_priority`` runs the child at nice -20 (see
    :func:`scoville.emulator.run.raise_priority`) for tighter pacing on a busy host;
    ``spin_horizon_ms`` overrides how close an event must be for its loop to stay on the CPU
    (see :mod:`scoville.emulator.realtime`; 0 never spins); ``reasoning_tokens`` N streams the first N
    output tokens of each chat answer as reasoning.
    """
    cmd = [sys.executable, "-c", _BOOTSTRAP, str(os.getpid()), "--port", "0", "--uvloop"]
    if high_priority:
        cmd.append("--high-priority")
    if spin_horizon_ms is not None:
        cmd += ["--spin-horizon-ms", str(spin_horizon_ms)]
    if hardware:
        cmd += ["--hardware", hardware]
    if model:
        cmd += ["--model", model]
    if config:
        cmd += ["--config", json.dumps(config)]
    if max_queue is not None:
        cmd += ["--max-queue", str(max_queue)]
    if served_model_name:
        cmd += ["--served-model-name", served_model_name]
    if reasoning_tokens:
        cmd += ["--reasoning-tokens", str(reasoning_tokens)]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env.pop(API_KEY_ENV, None)
    if api_key:
        env[API_KEY_ENV] = api_key
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                            text=True, env=env)
    out_tail: deque[str] = deque(maxlen=50)
    err_tail: deque[str] = deque(maxlen=50)
    ready: list[dict[str, Any]] = []
    got_ready = threading.Event()
    threads = [threading.Thread(target=_drain, args=(proc.stdout, out_tail, ready, got_ready), daemon=True),
               threading.Thread(target=_drain, args=(proc.stderr, err_tail, [], None), daemon=True)]
    for t in threads:
        t.start()
    try:
        handle = _await_ready(proc, ready, got_ready, err_tail)
        yield handle
    finally:
        _stop(proc)


def _await_ready(proc: subprocess.Popen[str], ready: list[dict[str, Any]], got_ready: threading.Event,
                 err_tail: deque[str]) -> EmulatorHandle:
    def fail(why: str) -> EmulatorStartError:
        time.sleep(0.2)  # let the stderr reader catch the last lines
        tail = next((ln for ln in reversed(err_tail) if ln.strip()), "")
        return EmulatorStartError(f"the emulator did not start ({why}){': ' + tail if tail else ''}")

    if not got_ready.wait(START_TIMEOUT_S) or not ready:
        code = proc.poll()
        raise fail(f"exit code {code}" if code is not None else f"no ready line within {START_TIMEOUT_S:.0f} s")
    url = ready[0]["url"]
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        try:
            with urllib.request.urlopen(url + "/health", timeout=5) as r:
                if r.status == 200:
                    break
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            raise fail("/health never answered")
        time.sleep(0.05)
    info = _get_json(url + "/scoville/info")
    return EmulatorHandle(base_url=url, model=info["model"], system=info["system"], config=info["config"],
                          pid=proc.pid)
