"""What the client needs to know about its target, kept apart from the load it applies."""

from __future__ import annotations

import base64
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

import msgspec

APIS = ("completions", "chat")
REDACTED = "<redacted>"


def strip_userinfo(url: str) -> tuple[str, str | None]:
    """``url`` without ``user:pass@``, and that userinfo decoded (None when there was none)."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url, None
    userinfo, _, host = parts.netloc.rpartition("@")
    user, _, password = userinfo.partition(":")
    return urlunsplit(parts._replace(netloc=host)), f"{unquote(user)}:{unquote(password)}"


class ClientConfig(msgspec.Struct, kw_only=True):
    """One target server and how to talk to it.

    ``api_key`` is held in memory only: ``to_manifest()`` leaves it out, so it
    never reaches a run directory. So is ``basic_auth``: credentials written into
    the URL (``http://user:pass@host``) are taken out of ``base_url`` at once and
    sent as HTTP Basic authentication; ``redact`` removes both secrets from any
    text the server sends back (an error body may echo the key). ``extensions`` says whether the server took
    vLLM's non-OpenAI fields (``ignore_eos``, ``min_tokens``,
    ``continuous_usage_stats``); the probe detects it and the manifest records it.
    """

    base_url: str
    model: str
    api: str = "completions"
    api_key: str | None = None
    basic_auth: str | None = None
    ignore_eos: bool = True
    extensions: bool = True
    timeout_s: float = 600.0
    read_timeout_s: float = 120.0
    vocab_size: int = 32000
    tokenizer: str | None = None
    # Chat prompt words the server's /tokenize reads as one token each (set by the probe; see client.text).
    prompt_words: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        from scoville.client.errors import ClientError

        self.base_url, userinfo = strip_userinfo(self.base_url)
        if userinfo is not None:
            self.basic_auth = userinfo
        self.base_url = self.base_url.rstrip("/")
        if self.base_url.endswith("/v1"):
            self.base_url = self.base_url[:-3]
        if not self.base_url.startswith(("http://", "https://")):
            raise ClientError(f"--url {self.base_url!r} needs a scheme: http://HOST:PORT or https://HOST:PORT")
        for endpoint, api in (("/v1/chat/completions", "chat"), ("/v1/completions", "completions")):
            if self.base_url.endswith(endpoint):
                raise ClientError(f"--url is the server, not an endpoint: drop {endpoint!r} (--url "
                                  f"{self.base_url[:-len(endpoint)]}{'' if api == 'completions' else ' --api chat'})")
        if self.api not in APIS:
            raise ClientError(f"unknown --api {self.api!r}; use completions or chat")
        if not self.timeout_s > 0:  # also refuses NaN
            raise ClientError(f"--timeout must be a positive number of seconds (got {self.timeout_s:g})")
        if not self.read_timeout_s > 0:
            raise ClientError(f"--read-timeout must be a positive number of seconds (got {self.read_timeout_s:g})")

    @property
    def endpoint(self) -> str:
        return f"{self.base_url}/v1/{'chat/completions' if self.api == 'chat' else 'completions'}"

    def headers(self) -> dict[str, str]:
        h = {"Content-Type": "application/json"}
        if self.api_key:
            h["Authorization"] = f"Bearer {self.api_key}"
        elif self.basic_auth:
            h["Authorization"] = "Basic " + base64.b64encode(self.basic_auth.encode()).decode()
        return h

    def redact(self, text: str) -> str:
        """``text`` with the API key and the URL's password replaced (before anything is stored)."""
        secrets = [self.api_key, self.basic_auth]
        if self.basic_auth:
            secrets.append(self.basic_auth.partition(":")[2])
        for secret in sorted(filter(None, secrets), key=len, reverse=True):
            text = text.replace(secret, REDACTED)
        return text

    def to_manifest(self) -> dict[str, Any]:
        """The manifest ``target``: everything but the secrets."""
        d = msgspec.to_builtins(self)
        d.pop("api_key", None)
        d.pop("basic_auth", None)
        d.pop("prompt_words", None)  # the probe finds them again on a resume
        d["prompt_words_checked"] = len(self.prompt_words)
        d["endpoint"] = self.endpoint
        return d
