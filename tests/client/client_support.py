"""A scriptable OpenAI-compatible loopback server for the client tests.

Real HTTP on 127.0.0.1, served by aiohttp in a background thread (so both
in-process drivers and subprocess sweeps can hit it). Each request's behaviour
comes from ``server.behave(index, body) -> Behaviour``: pacing, chunk sizes,
usage reporting, HTTP errors, 429s, malformed SSE, error events, keep-alives,
disconnects and stalls.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
from aiohttp import web


@dataclass
class Behaviour:
    tokens: int | None = None          # output tokens (default: the request's max_tokens)
    per_chunk: int = 1                 # tokens per chunk (multi-token chunks when > 1)
    chunk_sizes: list[int] | None = None  # explicit tokens per chunk (overrides per_chunk)
    ttft_s: float = 0.0
    interval_s: float = 0.0
    status: int = 200
    error_body: str = '{"error": {"message": "boom"}}'
    usage: bool = True                 # final usage event
    continuous_usage: bool = False     # cumulative usage on every chunk
    token_ids: bool = False            # send token_ids per chunk
    keepalive_every: int = 0           # a ": keep-alive" comment every n chunks
    empty_first: bool = False          # an empty-text chunk before the first token
    malformed_after: int | None = None # send garbage after n chunks
    error_event_after: int | None = None
    disconnect_after: int | None = None
    stall_after: int | None = None     # stop sending (but keep the connection) after n chunks
    done: bool = True                  # send [DONE]
    finish: bool = True                # finish_reason on the last chunk
    cached_tokens: int | None = None
    reject_extensions: bool = False    # 400 on ignore_eos/min_tokens like a strict OpenAI server
    crlf: bool = False


@dataclass
class FakeServer:
    behave: Callable[[int, dict], Behaviour] = lambda i, body: Behaviour()
    models: list[str] = field(default_factory=lambda: ["test-model"])
    max_model_len: int | None = None   # listed in /v1/models as vLLM does
    count_tokens: Callable[[str], int] | None = None  # a tokenizer: serves /tokenize and counts chat prompts
    require_key: str | None = None
    bodies: list[dict] = field(default_factory=list)
    headers: list[dict] = field(default_factory=list)
    base_url: str = ""
    send_log: list[tuple[float, int]] = field(default_factory=list)
    in_flight: int = 0
    max_in_flight: int = 0
    arrivals: list[float] = field(default_factory=list)

    def set(self, behaviour: Behaviour) -> None:
        self.behave = lambda i, body: behaviour

    # -- handlers ------------------------------------------------------------------------------
    async def _models(self, request: web.Request) -> web.Response:
        extra = {"max_model_len": self.max_model_len} if self.max_model_len else {}
        return web.json_response({"object": "list", "data": [{"id": m, "object": "model", **extra}
                                                             for m in self.models]})

    async def _complete(self, request: web.Request) -> web.StreamResponse:
        if self.require_key and request.headers.get("Authorization") != f"Bearer {self.require_key}":
            return web.json_response({"error": {"message": "bad key"}}, status=401)
        body = await request.json()
        self.arrivals.append(time.perf_counter())
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            return await self._stream(request, body)
        except ConnectionResetError:  # the client went away (killed, interrupted, timed out)
            return web.Response(status=499)
        finally:
            self.in_flight -= 1

    async def _stream(self, request: web.Request, body: dict) -> web.StreamResponse:
        index = len(self.bodies)
        self.bodies.append(body)
        self.headers.append(dict(request.headers))
        b = self.behave(index, body)
        if b.reject_extensions and ("ignore_eos" in body or "continuous_usage_stats" in body.get("stream_options", {})):
            return web.json_response({"error": {"message": "extra fields not permitted"}}, status=400)
        if b.status != 200:
            return web.Response(status=b.status, text=b.error_body, content_type="application/json")
        chat = request.path.endswith("chat/completions")
        n = b.tokens if b.tokens is not None else int(body.get("max_tokens", 16))
        sizes = b.chunk_sizes or [min(b.per_chunk, n - i) for i in range(0, n, b.per_chunk)]
        prompt = body.get("prompt") if not chat else body["messages"][-1]["content"]
        count = self.count_tokens or (lambda text: len(text.split()))
        n_prompt = len(prompt) if isinstance(prompt, list) else count(prompt)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        nl = "\r\n" if b.crlf else "\n"

        async def send(obj) -> None:
            data = obj if isinstance(obj, str) else json.dumps(obj)
            await resp.write(f"data: {data}{nl}{nl}".encode())

        if b.ttft_s:
            await asyncio.sleep(b.ttft_s)
        if b.empty_first:
            await send(self._chunk(chat, "", None, None))
        sent = 0
        for j, k in enumerate(sizes):
            if b.malformed_after == j:
                await resp.write(b"data: {not json\n\n")
            if b.error_event_after == j:
                await send({"error": {"message": "engine died", "code": 500}})
            if b.disconnect_after == j:
                request.transport.close()
                return resp
            if b.stall_after == j:
                await asyncio.sleep(3600)
            if j and b.interval_s:
                await asyncio.sleep(b.interval_s)
            if b.keepalive_every and j % b.keepalive_every == 0:
                await resp.write(f": keep-alive{nl}{nl}".encode())
            sent += k
            last = j == len(sizes) - 1
            chunk = self._chunk(chat, " tok" * k, "length" if last and b.finish else None,
                                list(range(sent - k, sent)) if b.token_ids else None)
            if b.continuous_usage:
                chunk["usage"] = {"prompt_tokens": n_prompt, "completion_tokens": sent}
            self.send_log.append((time.perf_counter(), k))
            await send(chunk)
        if b.usage:
            usage = {"prompt_tokens": n_prompt, "completion_tokens": sent, "total_tokens": n_prompt + sent}
            if b.cached_tokens is not None:
                usage["prompt_tokens_details"] = {"cached_tokens": b.cached_tokens}
            await send({"id": "x", "choices": [], "usage": usage})
        if b.done:
            await send("[DONE]")
        await resp.write_eof()
        return resp

    @staticmethod
    def _chunk(chat: bool, text: str, finish: str | None, ids: list[int] | None) -> dict:
        if chat:
            choice = {"index": 0, "delta": {"content": text}, "finish_reason": finish}
        else:
            choice = {"index": 0, "text": text, "finish_reason": finish}
        if ids is not None:
            choice["token_ids"] = ids
        return {"id": "x", "object": "text_completion", "choices": [choice]}

    async def _tokenize(self, request: web.Request) -> web.Response:
        if self.count_tokens is None:
            return web.Response(status=404)
        body = await request.json()
        return web.json_response({"count": self.count_tokens(body["prompt"]), "max_model_len": self.max_model_len})

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/tokenize", self._tokenize)
        app.router.add_get("/v1/models", self._models)
        app.router.add_post("/v1/completions", self._complete)
        app.router.add_post("/v1/chat/completions", self._complete)
        return app


def _serve(server: FakeServer) -> tuple[threading.Thread, asyncio.AbstractEventLoop, web.AppRunner]:
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    holder: dict = {}

    def main() -> None:
        asyncio.set_event_loop(loop)
        runner = web.AppRunner(server.app(), handle_signals=False, shutdown_timeout=0.1)
        loop.run_until_complete(runner.setup())
        site = web.TCPSite(runner, "127.0.0.1", 0)
        loop.run_until_complete(site.start())
        port = site._server.sockets[0].getsockname()[1]
        server.base_url = f"http://127.0.0.1:{port}"
        holder["runner"] = runner
        ready.set()
        loop.run_forever()

    thread = threading.Thread(target=main, daemon=True)
    thread.start()
    ready.wait(10)
    return thread, loop, holder["runner"]


class KeepAliveServer:
    """A raw HTTP/1.1 streaming server on 127.0.0.1 whose keep-alive connections go stale on cue.

    ``drop`` says what happens to a kept-alive connection: ``"on-reuse"`` closes it
    when a second request arrives on it, unanswered (the server timed it out just as
    the client sent), ``"after-answer"`` closes it right after each answer although
    the answer said keep-alive (the client's pooled socket is dead before reuse).
    """

    def __init__(self, drop: str) -> None:
        self.drop = drop
        self.connections = 0
        self.answered = 0
        self.dropped = 0
        self.base_url = ""

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        served = 0
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(next(line.split(b":", 1)[1] for line in head.split(b"\r\n")
                                  if line.lower().startswith(b"content-length")))
                await reader.readexactly(length)
                if served and self.drop == "on-reuse":
                    self.dropped += 1
                    return
                body = (b'data: {"choices":[{"text":" a","finish_reason":null}]}\n\n'
                        b'data: {"choices":[{"text":" b","finish_reason":"length"}]}\n\n'
                        b'data: {"choices":[],"usage":{"prompt_tokens":4,"completion_tokens":2}}\n\n'
                        b"data: [DONE]\n\n")
                served += 1
                self.answered += 1  # counted before it is sent: the client may finish before drain() returns
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: keep-alive\r\n"
                             b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
                await writer.drain()
                if self.drop == "after-answer":
                    self.dropped += 1
                    return
        except (asyncio.IncompleteReadError, ConnectionError):
            return
        finally:
            writer.close()

    def start(self) -> tuple[threading.Thread, asyncio.AbstractEventLoop]:
        loop = asyncio.new_event_loop()
        ready = threading.Event()

        def main() -> None:
            asyncio.set_event_loop(loop)
            srv = loop.run_until_complete(asyncio.start_server(self._serve, "127.0.0.1", 0))
            self.base_url = f"http://127.0.0.1:{srv.sockets[0].getsockname()[1]}"
            ready.set()
            loop.run_forever()
            srv.close()
            pending = asyncio.all_tasks(loop)  # open connections: end them on this loop, not at garbage collection
            for task in pending:
                task.cancel()
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.close()

        thread = threading.Thread(target=main, daemon=True)
        thread.start()
        ready.wait(10)
        return thread, loop


@pytest.fixture
def stale_server(request):
    s = KeepAliveServer(request.param)
    thread, loop = s.start()
    yield s
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)


class Served:
    """A FakeServer running in its own thread; ``stop()`` takes it down (nothing listens on its port after)."""

    def __init__(self, server: FakeServer) -> None:
        self.server = server
        self.thread, self.loop, self.runner = _serve(server)
        self.stopped = False

    def stop(self) -> None:
        if not self.stopped:
            self.stopped = True
            asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(10)
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)


@pytest.fixture
def served():
    s = Served(FakeServer())
    yield s
    s.stop()


@pytest.fixture
def server(served):
    return served.server


@pytest.fixture(scope="session")
def tiny_tokenizer(tmp_path_factory) -> str:
    """A byte-level BPE trained here on a few sentences (no download): a tokenizer.json path for --tokenizer."""
    tokenizers = pytest.importorskip("tokenizers")
    tok = tokenizers.Tokenizer(tokenizers.models.BPE(unk_token=None))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = tokenizers.decoders.ByteLevel()
    trainer = tokenizers.trainers.BpeTrainer(vocab_size=300, special_tokens=["<s>"],
                                             initial_alphabet=tokenizers.pre_tokenizers.ByteLevel.alphabet())
    corpus = ["the answer is that the model thinks before it answers", "let me think about the answer",
              "tokens are counted by the server and by the client"] * 20
    tok.train_from_iterator(corpus, trainer)
    path = tmp_path_factory.mktemp("tok") / "tokenizer.json"
    tok.save(str(path))
    return str(path)


# --- `scoville` as a user runs it: a real subprocess --------------------------------------------------------------

CLI = [sys.executable, "-c", "from scoville.cli import main; main()"]
CLI_ENV = dict(os.environ, COLUMNS="1000")  # Rich wraps long lines at the terminal width when not on a terminal


def run_cli(*args: str, timeout: float, preexec: Callable[[], None] | None = None,
            cli: list[str] = CLI, columns: int = 1000) -> subprocess.CompletedProcess:
    """Run ``scoville ARGS`` to completion, capturing its output as text (``columns``: the terminal width
    Rich assumes; wide by default so assertions see whole lines)."""
    return subprocess.run([*cli, *args], capture_output=True, text=True, timeout=timeout,
                          env=dict(CLI_ENV, COLUMNS=str(columns)), preexec_fn=preexec)


def start_cli(*args: str) -> subprocess.Popen:
    """Start ``scoville ARGS`` in the background (to signal or kill it mid-run), with Ctrl-C's default action as
    at a terminal: a test suite started as a shell's background job runs with SIGINT ignored, which its children
    inherit, and a sweep that cannot see Ctrl-C finishes instead of stopping."""
    return subprocess.Popen([*CLI, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=CLI_ENV,
                            preexec_fn=_interruptible)


def _interruptible() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def wait_until(pred: Callable[[], object], timeout: float) -> None:
    """Poll ``pred`` until it holds; an AssertionError after ``timeout`` seconds."""
    end = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > end:
            raise AssertionError("condition not reached")
        time.sleep(0.02)


def raw_socket_server(reply: Callable[[bytes], bytes]) -> socket.socket:
    """A loopback listener that answers each connection's first read with ``reply(request)`` and closes it: for
    servers no HTTP framework would write (another protocol, a keep-alive it does not keep). Close the
    returned listener to stop it."""
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                conn.sendall(reply(conn.recv(65536)))

    threading.Thread(target=serve, daemon=True).start()
    return listener
