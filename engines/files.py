"""Writing model and voice files so that readers never see half of one.

A file is written to a temporary name in its own directory and renamed over
the target (one atomic rename on POSIX). A directory is built aside and swapped
in: the old one is moved out of the way first, so at every moment ``dest`` is
either the whole old tree or the whole new one.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path


def write_atomically(path: Path, write: Callable[[Path], None]) -> None:
    """Call ``write(tmp_path)``, then rename the result to ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        write(Path(tmp))
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_bytes_atomically(path: Path, data: bytes) -> None:
    write_atomically(path, lambda tmp: tmp.write_bytes(data))


def replace_dir(staging: Path, dest: Path) -> None:
    """Move the finished directory ``staging`` to ``dest``, replacing what is there.

    ``staging`` must be on the same filesystem as ``dest`` (make it a sibling).
    """
    staging, dest = Path(staging), Path(dest)
    if not dest.exists():
        os.rename(staging, dest)
        return
    old = Path(tempfile.mkdtemp(prefix=f".{dest.name}.old.", dir=dest.parent))
    os.rename(dest, old / dest.name)
    os.rename(staging, dest)
    shutil.rmtree(old, ignore_errors=True)
