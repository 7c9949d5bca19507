"""Writing report files without harming whatever is at the destination.

``-o PATH`` is whatever was typed, and a report run as root once turned the
device ``/dev/full`` into an HTML file. So a destination is refused, in one
line, when it is a symbolic link (it would be replaced, or followed into some
other file), anything but a regular file (a folder, a device, a FIFO, a
socket), or a data file of a run (a run folder holds ``manifest.json``, the
journal and Parquet files; only report files - .html, .png, .svg - may be
written into it, as ``scoville sweep`` writes ``report.html``).

The bytes go to a new temporary file beside the destination (created
exclusively, so never an existing file or link), which is then renamed over
it: a reader never sees half a report, and a failed write leaves what was
there.
"""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path

from scoville.errors import UserError
from scoville.results.store import MANIFEST, POINTS_DIR

REPORT_SUFFIXES = (".html", ".htm", ".png", ".svg")


def _run_folder(folder: Path) -> Path | None:
    """The run directory ``folder`` is, or whose ``requests/`` folder it is; None when neither."""
    for candidate in (folder, folder.parent if folder.name == POINTS_DIR else None):
        if candidate is not None and (candidate / MANIFEST).exists():
            return candidate
    return None


def check_destination(path: Path) -> None:
    """Refuse (UserError) a destination that writing a report there would damage."""
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        mode = None
    except OSError as e:
        raise UserError(f"cannot write the report to {path} ({e.strerror or e}); give a file in a folder you "
                        "can write") from None
    if mode is not None and stat.S_ISLNK(mode):
        raise UserError(f"{path} is a symbolic link; give the path of a regular file (a link is neither followed "
                        "nor replaced)")
    if mode is not None and stat.S_ISDIR(mode):
        raise UserError(f"{path} is a folder; give a file name such as {path / 'report.html'}")
    if mode is not None and not stat.S_ISREG(mode):
        raise UserError(f"{path} is a device or special file, not a regular file; give a file name such as "
                        "report.html")
    run = _run_folder(path.parent.resolve())
    if run is not None and path.suffix.lower() not in REPORT_SUFFIXES:
        raise UserError(f"{path} is in the folder of run {run.name}, which holds its data; only report files "
                        f"({', '.join(REPORT_SUFFIXES)}) may be written there")


def write_file(path: Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` through a fresh temporary file and a rename, after ``check_destination``."""
    check_destination(path)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
    except OSError as e:
        raise UserError(f"cannot write the report to {path} ({e.strerror or e}); give a file in a folder you "
                        "can write") from None
    return path
