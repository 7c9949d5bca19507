"""Fixtures for the executor tests: one local Ray cluster and one local process pool per session, and a loopback
streaming server.

The server is real HTTP on 127.0.0.1 (aiohttp in a background thread) and
keeps its own books — requests received, streams in flight, the most ever in
flight at once — so tests check the load the server actually saw, not what
the client believes it sent.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from dataclasses import dataclass, field

import pytest
from aiohttp import web


@dataclass
class LoopbackServer:
    """Streams ``max_tokens`` one-token chunks, ``interval_s`` apart, with a final usage event."""

    interval_s: float = 0.002
    base_url: str = ""
    received: list[str] = field(default_factory=list)  # request ids, in arrival order (from the prompt seed)
    in_flight: int = 0
    max_in_flight: int = 0
    completed: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def drain(self, timeout_s: float = 10.0) -> None:
        """Wait (at most ``timeout_s``) for streams still open from an earlier test, e.g. one it interrupted."""
        deadline = time.monotonic() + timeout_s
        while self.in_flight > 0 and time.monotonic() < deadline:
            time.sleep(0.02)

    def reset(self) -> None:
        with self._lock:
            self.received.clear()
            self.in_flight = self.max_in_flight = self.completed = 0

    async def _models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "test-model", "object": "model"}]})

    async def _complete(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        n = int(body.get("max_tokens", 16))
        prompt = body.get("prompt") or []
        with self._lock:
            self.received.append(str(len(prompt)))
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        try:
            await resp.prepare(request)
            for i in range(n):
                await asyncio.sleep(self.interval_s)
                chunk = {"choices": [{"index": 0, "text": "x", "finish_reason": "length" if i == n - 1 else None}]}
                await resp.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
            usage = {"choices": [], "usage": {"prompt_tokens": len(prompt), "completion_tokens": n}}
            await resp.write(b"data: " + json.dumps(usage).encode() + b"\n\ndata: [DONE]\n\n")
            await resp.write_eof()
            with self._lock:
                self.completed += 1
        finally:
            with self._lock:
                self.in_flight -= 1
        return resp

    def serve(self) -> LoopbackServer:
        ready = threading.Event()

        def run() -> None:
            loop = asyncio.new_event_loop()
            app = web.Application()
            app.router.add_get("/v1/models", self._models)
            app.router.add_post("/v1/completions", self._complete)
            runner = web.AppRunner(app, access_log=None)
            loop.run_until_complete(runner.setup())
            site = web.TCPSite(runner, "127.0.0.1", 0)
            loop.run_until_complete(site.start())
            port = site._server.sockets[0].getsockname()[1]
            self.base_url = f"http://127.0.0.1:{port}"
            ready.set()
            loop.run_forever()

        threading.Thread(target=run, daemon=True).start()
        ready.wait(10)
        return self


@pytest.fixture(scope="session")
def loopback() -> LoopbackServer:
    return LoopbackServer().serve()


@pytest.fixture
def server(loopback: LoopbackServer) -> LoopbackServer:
    loopback.drain()   # an earlier test's streams must not count in this one's books
    loopback.reset()
    loopback.interval_s = 0.002
    return loopback


@pytest.fixture(scope="session")
def local_pool():
    """One 2-worker LocalExecutor for the session: its ``spawn`` workers import scoville once, not once per module."""
    from scoville.executor import LocalExecutor

    with LocalExecutor(max_workers=2) as ex:
        yield ex


@pytest.fixture(scope="session")
def ray_cluster():
    """One local 2-CPU Ray cluster for every Ray test of the session (start-up costs seconds)."""
    ray = pytest.importorskip("ray", reason="Ray tests need the extra: pip install -e '.[ray]'")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False,
             ignore_reinit_error=True)
    yield ray
    ray.shutdown()
