"""Writing model and voice files so that readers never see half of one.

A file is written to a temporary name in its own directory, fsynced, and
renamed over the target (one atomic rename on POSIX). A directory is built
aside and swapped in with one atomic exchange (Linux ``renameat2``
``RENAME_EXCHANGE``), so at every moment ``dest`` is either the whole old tree
or the whole new one, never missing. After each rename the parent directory is
fsynced, so a crash right after cannot bring the old name back.

Where no atomic exchange exists (not Linux, or a filesystem without it), the
old tree is moved aside and the new one renamed in: two renames, between which
``dest`` is briefly missing.
"""

from __future__ import annotations

import ctypes
import errno
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

AT_FDCWD = -100
RENAME_EXCHANGE = 2
_UNSUPPORTED = {errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.ENOTSUP}


def fsync_dir(path: Path) -> None:
    """Make the entries of directory ``path`` (a rename into it) durable."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


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
    fsync_dir(path.parent)


def write_bytes_atomically(path: Path, data: bytes) -> None:
    write_atomically(path, lambda tmp: tmp.write_bytes(data))


def exchange_paths(a: Path, b: Path) -> bool:
    """Swap ``a`` and ``b`` in one atomic step; False where the system cannot."""
    if not sys.platform.startswith("linux"):
        return False
    renameat2 = getattr(ctypes.CDLL(None, use_errno=True), "renameat2", None)
    if renameat2 is None:
        return False
    if renameat2(AT_FDCWD, os.fsencode(a), AT_FDCWD, os.fsencode(b), RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in _UNSUPPORTED:
        return False
    raise OSError(err, os.strerror(err), str(b))


def replace_dir(staging: Path, dest: Path) -> None:
    """Move the finished directory ``staging`` to ``dest``, replacing what is there.

    ``staging`` must be on the same filesystem as ``dest`` (make it a sibling).
    """
    staging, dest = Path(staging), Path(dest)
    if not dest.exists():
        os.rename(staging, dest)
        fsync_dir(dest.parent)
        return
    if exchange_paths(staging, dest):
        fsync_dir(dest.parent)
        shutil.rmtree(staging, ignore_errors=True)  # now the old tree
        return
    old = Path(tempfile.mkdtemp(prefix=f".{dest.name}.old.", dir=dest.parent))
    os.rename(dest, old / dest.name)
    os.rename(staging, dest)
    fsync_dir(dest.parent)
    shutil.rmtree(old, ignore_errors=True)
