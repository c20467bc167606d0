"""Files written whole or not at all: :func:`atomic_write_text` writes a temp file beside its target and renames it
over the target, so a crash or a kill never leaves half a record, table or report; :func:`remove_stale_temp_files`
clears the temp files of writers that were killed. The results store writes every record and table this way, and
so do the report, the dataset facts and a variant's description.
"""
from __future__ import annotations

import errno
import os
import re
import secrets
import socket
from pathlib import Path


class ResultsStoreError(RuntimeError):
    """A results file could not be written (or read); the message names the path and cause."""

    def __init__(self, path: os.PathLike | str, cause: BaseException | str):
        self.path = Path(path)
        self.cause = cause
        super().__init__(f"results store: cannot write {self.path}: {cause}")


_HOST = socket.gethostname().replace("/", "_")  # in temp file names


def atomic_write_text(path: os.PathLike | str, text: str) -> None:
    """Write ``text`` (UTF-8, its "\\n" line ends kept) to ``path`` atomically (:func:`atomic_write_bytes`)."""
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_bytes(path: os.PathLike | str, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically.

    Writes a temp file ``.<name>.<host>.<pid>.<random>.tmp`` in the same folder (host and pid tell
    :func:`remove_stale_temp_files` whether its writer still lives), flushes and fsyncs it, then
    ``os.replace``s it over ``path``. Parent folders are created. Any failure removes the temp
    file and leaves ``path`` as it was; an ``OSError`` (read-only folder, disk full, ...) is
    re-raised as ``ResultsStoreError`` naming ``path`` and the cause.
    """
    path = Path(path)
    parent = path.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ResultsStoreError(path, e) from e
    tmp: Path | None = None
    try:
        for _ in range(100):
            cand = parent / f".{path.name}.{_HOST}.{os.getpid()}.{secrets.token_hex(6)}.tmp"
            try:
                fd = os.open(cand, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            except FileExistsError:
                continue
            tmp = cand
            break
        else:  # pragma: no cover - 100 random collisions
            raise OSError(errno.EEXIST, "could not create a unique temp file", str(parent))
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        tmp = None
    except BaseException as e:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        if isinstance(e, OSError):
            raise ResultsStoreError(path, e) from e
        raise
    try:  # make the rename durable; best effort
        dfd = os.open(parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # signal 0: no signal, only the check that the process exists
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def remove_stale_temp_files(folder: os.PathLike | str) -> list[Path]:
    """Delete the temp files in ``folder`` that :func:`atomic_write_text` left when its process was
    killed mid-write: those written on this host by a process that no longer exists. Returns them."""
    pattern = re.compile(rf"^\..+\.{re.escape(_HOST)}\.(\d+)\.[0-9a-f]{{12}}\.tmp$")
    removed = []
    for p in sorted(Path(folder).glob(".*.tmp")):
        m = pattern.match(p.name)
        if m and int(m[1]) != os.getpid() and not _alive(int(m[1])):
            p.unlink(missing_ok=True)
            removed.append(p)
    return removed
