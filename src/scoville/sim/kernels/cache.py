"""A per-user disk cache of the slices the cost model derives from the measured kernel tables.

Reading the Parquet tables and building a GEMM cube or an attention grid takes about a second on a
cold start, the larger part of a `scoville simulate`. The results are small numpy arrays and depend
only on the installed aiconfigurator-core version and the code that slices its tables
(``tables.tables_version``), so they are kept under ``$XDG_CACHE_HOME/scoville/kernels/<version>/``
(``~/.cache`` by default; ``SCOVILLE_CACHE_DIR`` overrides, an empty value turns the cache off). One
``.npz`` per slice, written atomically (temporary file + rename), so concurrent processes can only race to
write the same content. A damaged or unreadable entry is recomputed, never trusted. Folders of other
versions are never read again and may be deleted (about 10 MB each).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from pathlib import Path

import numpy as np

Arrays = tuple[np.ndarray, ...]


def cache_dir(version: str | None) -> Path | None:
    """Where entries of this tables version live, or None when caching is off."""
    if version is None:
        return None
    root = os.environ.get("SCOVILLE_CACHE_DIR")
    if root == "":
        return None
    base = Path(root) if root else Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "scoville"
    return base / "kernels" / version


def cached(version: str | None, key: str, compute: Callable[[], Arrays | None]) -> Arrays | None:
    """``compute()``'s arrays, from the cache when present; ``None`` results are not cached."""
    folder = cache_dir(version)
    if folder is None:
        return compute()
    path = folder / (hashlib.sha256(key.encode()).hexdigest()[:32] + ".npz")
    try:
        with np.load(path, allow_pickle=False) as f:
            if str(f["key"]) == key:
                return tuple(f[f"a{i}"] for i in range(int(f["n"])))
    except (OSError, KeyError, ValueError):
        pass
    result = compute()
    if result is not None:
        _store(path, key, result)
    return result


def _store(path: Path, key: str, arrays: Arrays) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        with open(tmp, "wb") as fh:
            # numpy's stubs check the ** arrays against savez's keyword allow_pickle: bool
            np.savez(fh, key=np.array(key), n=np.array(len(arrays)),
                     **{f"a{i}": a for i, a in enumerate(arrays)})  # type: ignore[arg-type]
        os.replace(tmp, path)
    except OSError:
        pass   # a read-only or full home: the cache is an optimisation, the results stand without it
