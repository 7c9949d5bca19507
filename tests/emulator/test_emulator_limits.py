"""What one client can make the emulator do: bounded work per request, no stall of other streams, no held sockets.

Each test states an invariant that holds on a loaded machine: a status code, a
connection closed, work done in steps (counted, not timed), connects queued by
the kernel while the server is stopped.
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import select
import signal
import socket
import time
from pathlib import Path

import pytest
from emulator_support import ScriptedEngine

from scoville.emulator.protocol import APIError, parse
from scoville.emulator.server import BACKLOG, KEEPALIVE_S, Emulator, EmulatorOptions, start_site
from scoville.emulator.tokenizer import LocalTokenizer, word


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def _exchange(port: int, data: bytes, timeout: float = 30.0) -> bytes:
    """Send ``data``; the whole answer (head and Content-Length body), or fail after ``timeout`` without one."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        got = b""
        while True:
            head, sep, body = got.partition(b"\r\n\r\n")
            length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                           if line.lower().startswith(b"content-length:")), None)
            if sep and length is not None and len(body) >= length:
                return got
            try:
                chunk = s.recv(65536)
            except TimeoutError:
                chunk = b""
            if not chunk:
                pytest.fail(f"no whole answer within {timeout} s: {got[:200]!r}")
            got += chunk


def _head(path: str, length: int) -> bytes:
    return (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {length}\r\n\r\n").encode()


def test_a_body_over_the_limit_is_refused_from_its_length_before_it_arrives(emu):
    answer = _exchange(_port(emu.base_url), _head("/v1/completions", 100_000_000))  # and no body at all
    assert answer.startswith(b"HTTP/1.1 413") and b"Connection: close" in answer
    assert b"the request body is over" in answer and b"shorten the prompt" in answer


def test_a_body_nested_too_deep_is_a_400_not_a_500(emu):
    body = b'{"model": "llama-3.1-8b", "prompt": ' + b"[" * 10_000 + b"]" * 10_000 + b"}"
    answer = _exchange(_port(emu.base_url), _head("/v1/completions", len(body)) + body)
    assert answer.startswith(b"HTTP/1.1 400") and b"nested too deeply" in answer


def test_detokenize_refuses_ids_outside_the_vocabulary(emu):
    body = json.dumps({"tokens": [5, 10**30]}).encode()
    answer = _exchange(_port(emu.base_url), _head("/detokenize", len(body)) + body)
    assert answer.startswith(b"HTTP/1.1 400") and b"must lie in [0, " in answer


@pytest.mark.slow   # waits out the emulator's header timeout
def test_a_connection_that_never_completes_its_request_head_is_closed(emu):
    with socket.create_connection(("127.0.0.1", _port(emu.base_url)), timeout=KEEPALIVE_S + 30) as s:
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # and nothing more: slowloris
        try:
            assert s.recv(100) == b""
        except TimeoutError:
            pytest.fail(f"a half-sent request head held its connection for {KEEPALIVE_S + 30} s")


def test_the_listen_backlog_queues_a_thousand_simultaneous_connects(emu):
    """With the server stopped, the kernel completes exactly as many connects as the backlog holds."""
    wanted = 1100
    somaxconn = int(Path("/proc/sys/net/core/somaxconn").read_text())
    if somaxconn < wanted:
        pytest.skip(f"net.core.somaxconn is {somaxconn}: the kernel caps any backlog below {wanted}")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < wanted + 200:
        if hard != resource.RLIM_INFINITY and hard < wanted + 200:
            pytest.skip(f"only {hard} file descriptors may be opened")
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted + 200, hard))
    assert wanted <= BACKLOG
    socks: list[socket.socket] = []
    os.kill(emu.pid, signal.SIGSTOP)
    try:
        poller = select.poll()
        for _ in range(wanted):
            s = socket.socket()
            s.setblocking(False)
            s.connect_ex(("127.0.0.1", _port(emu.base_url)))
            socks.append(s)
            poller.register(s, select.POLLOUT)
        connected, deadline = 0, time.monotonic() + 10
        while connected < wanted and time.monotonic() < deadline:
            for fd, events in poller.poll(100):
                poller.unregister(fd)
                connected += not events & (select.POLLERR | select.POLLHUP)
        assert connected == wanted  # a backlog of 128 completes 129 and leaves the rest retrying their SYN
    finally:
        os.kill(emu.pid, signal.SIGCONT)
        for s in socks:
            s.close()


# ---- in-process: the server's own limits, made small ------------------------------------------

def _emulator(**options) -> Emulator:
    return Emulator(ScriptedEngine(tokens=3, interval=0.001),
                    EmulatorOptions(served_model_names=["m"], max_model_len=4096, vocab_size=32000, **options))


def test_a_body_that_stops_arriving_is_a_408_and_the_connection_closes():
    async def main() -> bytes:
        runner, port = await start_site(_emulator(body_timeout_s=0.3))
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(_head("/v1/completions", 1000) + b'{"model": "m", ')  # and the rest never comes
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)
            length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
            answer = head + await asyncio.wait_for(reader.readexactly(length), 30)
            writer.close()
            return answer
        finally:
            await runner.cleanup()

    answer = asyncio.run(main())
    assert answer.startswith(b"HTTP/1.1 408") and b"did not arrive within 0.3 s" in answer
    assert b"Connection: close" in answer


def test_a_long_text_prompt_is_tokenized_in_steps_and_only_until_past_the_context():
    """Tokenizing yields to the event loop (other streams keep their pace) and stops once over the context."""
    emu = _emulator()
    text = " ".join(f"w{i}q" for i in range(200_000))  # ~400k tokens, far over 4,096

    async def main() -> tuple[int, APIError]:
        ticks = 0
        stop = asyncio.Event()

        async def ticker() -> None:
            nonlocal ticks
            while not stop.is_set():
                ticks += 1
                await asyncio.sleep(0)

        task = asyncio.create_task(ticker())
        await asyncio.sleep(0)
        with pytest.raises(APIError) as e:
            await emu.plan(parse({"model": "m", "prompt": text, "max_tokens": 1}, chat=False))
        stop.set()
        await task
        return ticks, e.value

    ticks, err = asyncio.run(main())
    assert err.status == 413 and "more than 4096 prompt tokens" in err.message
    assert ticks >= 4096 // 256  # the loop ran between the steps of one prompt's tokenization
    assert len(emu.tokenizer.encode(text, limit=4096)) < 4096 + 4096  # and the work stopped near the context


def test_trailing_whitespace_is_tokenized_in_linear_time():
    """``\\s*\\S+`` over whitespace with no word after it backtracks quadratically: 30 KB took 12.8 s."""
    tok = LocalTokenizer(32000)
    t0 = time.perf_counter()
    assert tok.encode("a" + " " * 400_000) == tok.encode("a")
    assert tok.encode(" \t\n" * 200_000) == []
    assert time.perf_counter() - t0 < 10  # ~10 ms here; the quadratic scan took hours


def test_a_giant_word_is_tokenized_in_steps():
    tok = LocalTokenizer(32000)
    ids: list[int] = []
    steps = sum(1 for _ in tok.text_steps("x" * 400_000, ids))
    assert len(ids) == 100_000 and steps >= 100_000 // 512
    assert ids == tok.encode("x" * 400_000)


def test_windows_and_limits_do_not_change_the_ids(monkeypatch):
    import random

    import scoville.emulator.tokenizer as tokenizer

    rng = random.Random(7)
    alphabet = "abcxyzé中.,  \t\n\u3000"
    texts = ["".join(rng.choice([" " + word(rng.randrange(16, 32000)), rng.choice(alphabet) * rng.randrange(1, 70)])
                     for _ in range(rng.randrange(0, 40))) for _ in range(300)]
    whole = [LocalTokenizer(32000).encode(t) for t in texts]
    monkeypatch.setattr(tokenizer, "_WINDOW", 5)  # cut every few characters: at piece ends only
    tok = LocalTokenizer(32000)
    assert [tok.encode(t) for t in texts] == whole
    for t, ids in zip(texts, whole, strict=True):
        limit = rng.randrange(0, 30)
        got = tok.encode(t, limit=limit)
        assert got == ids[:len(got)] and (len(got) > limit or got == ids)
