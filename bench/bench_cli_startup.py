"""How long the CLI takes to answer before it does any work: `scoville --help` and `scoville <command> --help`.

Every command line pays this; the listing imports no command module (``scoville.cli.COMMANDS``), and a command
line imports only its own. Printed beside ``python -c pass`` (the interpreter's own start) in the same run, on
one core, median of ``--repeat`` runs::

    python bench/bench_cli_startup.py
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

LINES = [
    ("python -c pass", [sys.executable, "-c", "pass"]),
    ("scoville --help", [sys.executable, "-c", "from scoville.cli import main; main()", "--help"]),
    ("scoville simulate --help", [sys.executable, "-c", "from scoville.cli import main; main()", "simulate", "--help"]),
    ("scoville sweep --help", [sys.executable, "-c", "from scoville.cli import main; main()", "sweep", "--help"]),
]


def seconds(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(["taskset", "-c", str(min(os.sched_getaffinity(0))), *cmd], capture_output=True, check=True)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0])
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    base = None
    for label, cmd in LINES:
        seconds(cmd)                                                  # warm the page cache
        t = statistics.median(seconds(cmd) for _ in range(args.repeat))
        base = base or t
        print(f"{label:28s} {t * 1e3:7.0f} ms   {t / base:5.1f}x python -c pass"
              + ("   (target: --help under 300 ms)" if label == "scoville --help" else ""))


if __name__ == "__main__":
    main()
