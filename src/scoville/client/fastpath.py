"""Plain-HTTP streaming over raw sockets with kernel receive timestamps (Linux), the client's hot path.

Why not aiohttp here: a serving engine emits one token for every running
sequence at the same instant (one decode step), so at 256 streams the client
gets 256 chunks in a burst. Stamping a chunk when Python gets round to it
(``perf_counter()`` after aiohttp's parser, stream reader and task wake-up,
~30 µs a chunk) puts the last chunk of a burst milliseconds late. Here every
socket has ``SO_TIMESTAMPNS`` set, so the kernel stamps each segment on
arrival and ``recvmsg`` hands the stamp over with the bytes: the recorded time
is when the chunk reached the machine, however busy the event loop is. Reading
is one ``add_reader`` callback per socket: ``recvmsg`` → chunked-transfer
decoding → the SSE parser, no task switch per chunk.

The kernel stamp is CLOCK_REALTIME; it is mapped to the run clock with the
(realtime − monotonic) offset sampled when the request starts. For TCP the
stamp of a read is that of the newest segment in it, so chunks that were
coalesced into one read share the later time (never earlier than the truth).

Only ``http://`` targets use this path (``https`` goes through aiohttp), and
only on Linux; keep-alive connections are pooled per target.

A pooled connection may have been closed by the server while it sat idle
(uvicorn, behind vLLM and SGLang, closes after 5 s). So a socket idle longer than
``KEEPALIVE_IDLE_S`` is never reused, one the server has visibly closed is
dropped when taken, and a request that fails on a reused socket before any byte
of the answer is retried once on a *fresh* connection, never on another pooled
one (which would be just as stale).
"""

from __future__ import annotations

import asyncio
import socket
import struct
import sys
import time
from collections.abc import Callable
from urllib.parse import urlsplit

SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)  # Linux asm-generic value
_ANC = socket.CMSG_SPACE(16)
_unpack_ts = struct.Struct("qq").unpack_from
AVAILABLE = sys.platform.startswith("linux")
# Reuse an idle connection only this long: under uvicorn's 5 s keep-alive (and most servers' longer ones).
KEEPALIVE_IDLE_S = 4.0


class HTTPStreamError(Exception):
    """A transport-level failure of one request; ``kind`` is connect | timeout | disconnect | protocol."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class ClientLimitError(Exception):
    """This machine, not the server, cannot go on (no file descriptor left for a socket): ends the point."""

    @classmethod
    def no_socket(cls, e: OSError) -> ClientLimitError:
        """EMFILE / ENFILE on opening a socket, with what to change."""
        return cls(f"cannot open a socket: {e.strerror}; raise the open-file limit (ulimit -n) "
                   "or cap the requests in flight (--concurrency, --max-concurrency)")


def _still_open(sock: socket.socket) -> bool:
    """Whether an idle pooled socket can carry a request: no FIN, no reset, no stray bytes waiting."""
    try:
        return not sock.recv(1, socket.MSG_PEEK)  # b"" = the server closed it; data = a stray answer
    except (BlockingIOError, InterruptedError):
        return True  # nothing to read: open and quiet
    except OSError:
        return False


def _number(text: bytes, base: int, what: str) -> int:
    """A numeric protocol field; a garbled one fails this request (HTTPStreamError), not the sweep (ValueError)."""
    try:
        value = int(text, base)
    except ValueError:
        value = -1
    if value < 0:
        raise HTTPStreamError("protocol", f"malformed {what} {text[:40]!r}")
    return value


class _Response:
    """State machine of one response: headers, then chunked / length / close-delimited body."""

    __slots__ = ("buf", "status", "chunked", "remaining", "keep_alive", "headers_done", "body_done",
                 "chunk_left", "error_body", "got_bytes", "on_data", "close_delimited", "on_status")

    def __init__(self, on_data: Callable[[bytes, float], None], on_status: Callable[[int], None] | None) -> None:
        self.on_status = on_status
        self.buf = b""
        self.status = 0
        self.chunked = False
        self.remaining = -1
        self.keep_alive = True
        self.headers_done = False
        self.body_done = False
        self.chunk_left = 0
        self.error_body = b""
        self.got_bytes = False
        self.on_data = on_data
        self.close_delimited = False

    def feed(self, data: bytes, t: float) -> None:
        self.got_bytes = True
        buf = self.buf + data if self.buf else data
        if not self.headers_done:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                self.buf = buf
                if len(buf) > 65536:
                    raise HTTPStreamError("protocol", "response headers over 64 KiB")
                return
            self._headers(buf[:end])
            buf = buf[end + 4:]
        if self.chunked:
            self.buf = self._chunks(buf, t)
        else:
            self.buf = b""
            if self.remaining >= 0:
                buf = buf[: self.remaining]
                self.remaining -= len(buf)
                if self.remaining == 0:
                    self.body_done = True
            if buf:
                self._deliver(buf, t)

    def _headers(self, head: bytes) -> None:
        lines = head.split(b"\r\n")
        parts = lines[0].split(b" ", 2)
        if len(parts) < 2 or not parts[0].startswith(b"HTTP/"):
            raise HTTPStreamError("protocol", f"not an HTTP response: {lines[0][:60]!r}")
        self.status = _number(parts[1], 10, "status code")
        if not 100 <= self.status <= 999:
            raise HTTPStreamError("protocol", f"status code {self.status} is not three digits")
        self.keep_alive = parts[0] != b"HTTP/1.0"
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            name, value = name.strip().lower(), value.strip().lower()
            if name == b"transfer-encoding" and b"chunked" in value:
                self.chunked = True
            elif name == b"content-length":
                self.remaining = _number(value, 10, "Content-Length")
            elif name == b"connection":
                self.keep_alive = value == b"keep-alive" or (self.keep_alive and value != b"close")
        self.headers_done = True
        if self.on_status is not None:
            self.on_status(self.status)
        if self.status in (204, 304):  # never a body (RFC 9112 §6.3), whatever the headers say
            self.chunked, self.remaining = False, 0
        if not self.chunked and self.remaining < 0:
            self.close_delimited, self.keep_alive = True, False
        if self.remaining == 0:
            self.body_done = True

    def _chunks(self, buf: bytes, t: float) -> bytes:
        out = []
        pos, n = 0, len(buf)
        while pos < n and not self.body_done:
            if self.chunk_left > 0:
                take = min(self.chunk_left, n - pos)
                out.append(buf[pos:pos + take])
                pos += take
                self.chunk_left -= take
                if self.chunk_left == 0:
                    self.chunk_left = -2  # expect CRLF
                continue
            if self.chunk_left == -2:  # CRLF after the chunk data; a bare LF is accepted, as aiohttp's parser does
                if buf.startswith(b"\n", pos):
                    pos += 1
                elif n - pos < 2:
                    break
                elif buf.startswith(b"\r\n", pos):
                    pos += 2
                else:
                    raise HTTPStreamError("protocol", "chunk data not followed by CRLF")
                self.chunk_left = 0
                continue
            if self.chunk_left == -3:  # after the last chunk: optional trailers, then an empty line
                if buf.startswith(b"\r\n", pos):
                    pos += 2
                else:
                    end = buf.find(b"\r\n\r\n", pos)
                    if end < 0:
                        break
                    pos = end + 4
                self.body_done = True
                break
            eol = buf.find(b"\r\n", pos)
            if eol < 0:
                break
            size = _number(buf[pos:eol].split(b";", 1)[0], 16, "chunk size")
            pos = eol + 2
            self.chunk_left = size if size else -3
        if out:
            self._deliver(b"".join(out), t)
        return buf[pos:] if not self.body_done else b""  # a complete response leaves nothing behind

    def _deliver(self, data: bytes, t: float) -> None:
        if self.status == 200:
            self.on_data(data, t)
        elif len(self.error_body) < 300:
            self.error_body += data


class FastHTTP:
    """Keep-alive connections to one ``http://host:port`` and streamed POSTs over them."""

    def __init__(self, base_url: str, t0: float, *, idle_s: float = KEEPALIVE_IDLE_S) -> None:
        u = urlsplit(base_url)
        if u.scheme != "http":
            raise ValueError("FastHTTP serves http:// targets only")
        self.host = u.hostname or "127.0.0.1"
        self.port = u.port or 80
        self.prefix = u.path.rstrip("/")
        self.t0 = t0
        self.idle_s = idle_s
        self._idle: list[tuple[socket.socket, float]] = []  # (socket, monotonic time it went idle)
        self._addr: tuple | None = None

    async def _connect(self) -> socket.socket:
        loop = asyncio.get_running_loop()
        if self._addr is None:
            try:
                info = await loop.getaddrinfo(self.host, self.port, type=socket.SOCK_STREAM)
            except OSError as e:  # socket.gaierror: a name that does not resolve (now) fails this request only
                raise HTTPStreamError("connect", f"cannot connect to http://{self.host}:{self.port}: {e}") from None
            self._addr = info[0][0], info[0][4]
        family, addr = self._addr
        try:
            sock = socket.socket(family, socket.SOCK_STREAM)
        except OSError as e:  # EMFILE / ENFILE: out of file descriptors here, whatever the server does
            raise ClientLimitError.no_socket(e) from None
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        try:
            await asyncio.wait_for(loop.sock_connect(sock, addr), 10.0)
        except (TimeoutError, OSError) as e:
            sock.close()
            raise HTTPStreamError("connect", f"cannot connect to http://{self.host}:{self.port}: {e}") from None
        return sock

    def close(self) -> None:
        for s, _ in self._idle:
            s.close()
        self._idle.clear()

    def _pooled(self) -> socket.socket | None:
        """The most recently used idle socket that is young enough and still open (others are closed)."""
        now = time.monotonic()
        while self._idle:
            sock, since = self._idle.pop()
            if now - since < self.idle_s and _still_open(sock):
                return sock
            sock.close()
        return None

    async def post_stream(self, path: str, body: bytes, headers: dict[str, str],
                          on_data: Callable[[bytes, float], None], *, timeout_s: float,
                          read_timeout_s: float, on_status: Callable[[int], None] | None = None) -> tuple[int, bytes]:
        """POST ``body``; feed each decoded body piece with its arrival time; return (status, error body).

        ``on_status`` hears the status code as soon as the headers arrive, so a
        failure later in the body is still recorded with it.
        """
        host = f"[{self.host}]" if ":" in self.host else self.host  # an IPv6 literal is bracketed (RFC 3986)
        head = [f"POST {self.prefix}{path} HTTP/1.1", f"Host: {host}:{self.port}",
                f"Content-Length: {len(body)}", "Accept: text/event-stream"]
        head += [f"{k}: {v}" for k, v in headers.items()]
        request = ("\r\n".join(head) + "\r\n\r\n").encode() + body
        sock = self._pooled()
        reused = sock is not None
        while True:
            if sock is None:
                sock = await self._connect()
            resp = _Response(on_data, on_status)
            try:
                await self._exchange(sock, request, resp, timeout_s, read_timeout_s)
            except HTTPStreamError as e:
                sock.close()
                # A pooled connection the server closed as we sent: retry once, on a fresh connection.
                if reused and not resp.got_bytes and e.kind == "disconnect":
                    sock, reused = None, False
                    continue
                raise
            except BaseException:
                sock.close()
                raise
            if resp.keep_alive and resp.body_done and not resp.buf:
                self._idle.append((sock, time.monotonic()))
            else:
                sock.close()
            return resp.status, resp.error_body

    async def _exchange(self, sock: socket.socket, request: bytes, resp: _Response, timeout_s: float,
                        read_timeout_s: float) -> None:
        loop = asyncio.get_running_loop()
        done: asyncio.Future = loop.create_future()
        offset = time.time() - time.perf_counter() + self.t0  # realtime stamp -> run clock
        perf, t0 = time.perf_counter, self.t0
        recvmsg, fd = sock.recvmsg, sock.fileno()
        state = {"last": perf()}

        def on_readable() -> None:
            try:
                while True:
                    try:
                        data, anc, _, _ = recvmsg(262144, _ANC)
                    except (BlockingIOError, InterruptedError):
                        return
                    if not data:
                        if resp.close_delimited and resp.headers_done:
                            resp.body_done = True
                            _finish(None)
                        else:
                            _finish(HTTPStreamError("disconnect", "server closed the connection mid-response"))
                        return
                    if anc:
                        sec, ns = _unpack_ts(anc[0][2])
                        t = sec + ns * 1e-9 - offset
                    else:
                        t = perf() - t0
                    state["last"] = perf()
                    resp.feed(data, t)
                    if resp.body_done:
                        _finish(None)
                        return
            except HTTPStreamError as e:
                _finish(e)
            except ConnectionError as e:
                _finish(HTTPStreamError("disconnect", f"{type(e).__name__}: {e}"))
            except BaseException as e:  # parser errors (SSEError) and anything else end this request only
                _finish(e)

        def _finish(exc: BaseException | None) -> None:
            if not done.done():
                done.set_exception(exc) if exc is not None else done.set_result(None)

        def watchdog() -> None:
            idle = perf() - state["last"]
            if idle >= read_timeout_s:
                _finish(HTTPStreamError("timeout", "read timeout"))
            else:
                handles[0] = loop.call_later(read_timeout_s - idle, watchdog)

        try:
            await asyncio.wait_for(loop.sock_sendall(sock, request), timeout_s)
        except (ConnectionError, BrokenPipeError) as e:
            raise HTTPStreamError("disconnect", f"{type(e).__name__}: {e}") from None
        except TimeoutError:
            raise HTTPStreamError("timeout", "sending the request timed out") from None
        state["last"] = perf()
        handles = [loop.call_later(read_timeout_s, watchdog)]
        loop.add_reader(fd, on_readable)
        try:
            await asyncio.wait_for(done, timeout_s)
        except TimeoutError:
            raise HTTPStreamError("timeout", "total timeout") from None
        finally:
            loop.remove_reader(fd)
            handles[0].cancel()
