"""A failed job in one sentence: what went wrong and what to do, for the errors tokenwatt expects.

``files.logged`` asks here when a rule's script raises. tokenwatt's own exceptions (any class
defined in the ``tokenwatt`` package: ConfigError, CorpusError, MeterError, ModelError, ...) carry
a message written for the user, naming the key or file and the fix; a full disk (ENOSPC, or a quota)
is named with the file being written. Both are explained; anything else is a bug, and keeps its
traceback on the terminal. Text only: this module writes nothing.
"""

from __future__ import annotations

import errno
import os
import shutil
import signal
from pathlib import Path
from types import TracebackType

PACKAGE = "tokenwatt"
DISK_FULL = {errno.ENOSPC: "no space left on the device", errno.EDQUOT: "the disk quota is exceeded"}


def is_tokenwatt_error(err: BaseException) -> bool:
    """An exception of a class tokenwatt defines (or derives from one): its message is meant for the user."""
    return isinstance(err, Exception) and any(
        (cls.__module__ or "").split(".")[0] == PACKAGE for cls in type(err).__mro__
    )


def disk_full(err: BaseException) -> str | None:
    """Why a write failed for want of space, or None. polars reports it in its own error's text only."""
    for e in _chain(err):
        if isinstance(e, OSError) and e.errno in DISK_FULL:
            return DISK_FULL[e.errno]
        if "No space left on device" in str(e) or "(os error 28)" in str(e):
            return DISK_FULL[errno.ENOSPC]
    return None


def _chain(err: BaseException):
    seen = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        yield err
        err = err.__cause__ or err.__context__


def written_path(err: BaseException) -> str | None:
    """The file a failed write was writing: the error's own filename, else the ``path`` that
    ``files._atomic`` (every tokenwatt output goes through it) was writing when it failed."""
    for e in _chain(err):
        if isinstance(e, OSError) and e.filename:
            return str(e.filename)
    found = None
    tb: TracebackType | None = err.__traceback__
    while tb is not None:  # outermost first; the innermost _atomic frame wins
        frame = tb.tb_frame
        if frame.f_code.co_name == "_atomic" and frame.f_globals.get("__name__") == f"{PACKAGE}.common.files":
            found = str(frame.f_locals.get("path"))
        tb = tb.tb_next
    return found


def explain(err: BaseException, folder: str | os.PathLike | None = None) -> str | None:
    """The sentence for an expected failure: what went wrong and what to do (None for a bug: it keeps its traceback).
    ``folder``: where the job writes (its results folder), named with its free space when a full disk stops it."""
    if (why := disk_full(err)) is not None:
        path = written_path(err)
        target = f"while writing {path}" if path else "while this job wrote its outputs"
        where = os.path.dirname(path) if path else folder
        free = free_space(where) if where is not None else None
        room = f" ({where} has {free} free)" if free else ""
        return (
            f"{why} {target}; free space on that disk{room}, or set `results` to a folder on a larger one, and rerun "
            "the same command: every finished trial and file is kept, and a trial with a checkpoint resumes from it"
        )
    if is_tokenwatt_error(err):
        return str(err)
    return None


def free_space(folder: str | os.PathLike) -> str | None:
    """The free space on the disk of ``folder`` (its nearest existing parent), in words; None where it cannot be read."""
    path = os.path.abspath(folder)
    while not os.path.exists(path) and os.path.dirname(path) != path:
        path = os.path.dirname(path)
    try:
        free = float(shutil.disk_usage(path).free)
    except OSError:
        return None
    for unit in ("B", "KB", "MB", "GB"):
        if free < 1000 or unit == "GB":
            return f"{free:.0f} {unit}" if unit == "B" else f"{free:.1f} {unit}"
        free /= 1000
    return None


def results_folder(log_path: str | os.PathLike) -> str:
    """The results folder a job's log is under (``<results>/logs/<rule>/…``), or the log's own folder."""
    path = Path(log_path)
    for parent in path.parents:
        if parent.name == "logs":
            return str(parent.parent)
    return str(path.parent)


class JobStopped(RuntimeError):
    """The job's process was told to stop before it finished (SIGTERM from a scheduler or ``kill``, SIGINT from
    Ctrl-C)."""


def stop_with_a_sentence() -> None:
    """Turn SIGTERM and SIGINT into JobStopped: a job stopped mid-run then runs its cleanup and ends in its sentence
    (naming the job, through ``files.logged``), where SIGTERM would end it silently and Ctrl-C in a traceback."""

    def stop(signum: int, frame: object) -> None:
        raise JobStopped(
            f"stopped by {signal.Signals(signum).name} before it finished, and nothing of it is kept; rerun the same "
            "command and it runs again"
        )

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, stop)
