"""Manifest provenance: everything needed to recompute and judge a run, no secrets."""

from __future__ import annotations

import platform
import re
import socket
import sys
from importlib import metadata
from typing import Any

import scoville

_SECRET_KEYS = re.compile(
    r"^(api[_-]?key|authorization|password|secret|bearer|token|\w*_(secret|password)|\w*access_token|hf_token)$", re.I
)
# scheme://user:pass@host -> scheme://host wherever a URL appears in text (a --url on the command line).
_USERINFO = re.compile(r"(\b[a-zA-Z][a-zA-Z0-9+.-]*://)[^/@\s]*@")
_PACKAGES = ("aiohttp", "numpy", "pyarrow", "duckdb", "msgspec", "uvloop", "ray", "nvidia-ml-py")


def scrub(value: Any) -> Any:
    """Drop secret-looking keys and URL credentials anywhere in a nested structure (secrets never reach disk)."""
    if isinstance(value, dict):
        return {k: ("<redacted>" if _SECRET_KEYS.search(str(k)) and v else scrub(v)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [scrub(v) for v in value]
    if isinstance(value, str) and "@" in value:
        return _USERINFO.sub(r"\1", value)
    return value


def environment() -> dict[str, Any]:
    versions = {}
    for name in _PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return {
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "packages": versions,
    }


def base_manifest(
    *,
    source: str,
    target: dict[str, Any],
    system: dict[str, Any],
    model: dict[str, Any],
    serving: dict[str, Any],
    workload: dict[str, Any],
    load_plan: dict[str, Any],
    power: dict[str, Any],
    compat: str = "inferencex",
    slo: dict[str, float] | None = None,
    command: list[str] | None = None,
) -> dict[str, Any]:
    """The manifest fields of docs/architecture.md; ``source`` is "measured" or "simulated"."""
    if source not in ("measured", "simulated"):
        raise ValueError(f"source must be 'measured' or 'simulated', not {source!r}")
    return scrub(
        {
            "scoville_version": scoville.__version__,
            "source": source,
            "target": target,
            "system": system,
            "model": model,
            "serving": serving,
            "workload": workload,
            "load_plan": load_plan,
            "power": power,
            "compat": compat,
            "slo": slo or {},
            "environment": environment(),
            "command": command or sys.argv,
        }
    )


def source_label(manifest: dict[str, Any]) -> str:
    """What a run is, as every listing names it: ``simulated``, ``emulated`` (measured against scoville's built-in
    emulator: a real client over real HTTP, but the server's timing is the simulator's) or ``measured``."""
    if manifest.get("source") == "simulated":
        return "simulated"
    return "emulated" if (manifest.get("target") or {}).get("emulator") else str(manifest.get("source"))

