"""File I/O helpers used by the thin scripts: atomic writes and log redirection."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

if TYPE_CHECKING:  # only a type here: the Snakefile reads records through this module at every start
    import polars as pl


def _atomic(path: str | Path, write) -> None:
    """Write to a sibling temp file, then rename: a crash never leaves a half file behind."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_json(path: str | Path, obj: Any) -> None:
    _atomic(path, lambda p: p.write_text(json.dumps(obj, indent=2, sort_keys=True, allow_nan=False) + "\n", encoding="utf-8"))


def write_text(path: str | Path, text: str) -> None:
    _atomic(path, lambda p: p.write_text(text, encoding="utf-8"))


def read_json(path: str | Path) -> Any:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def write_parquet(path: str | Path, df: pl.DataFrame) -> None:
    _atomic(path, lambda p: df.write_parquet(p, compression="zstd", statistics=False))


@contextlib.contextmanager
def logged(log_path: str | Path) -> Iterator[None]:
    """Send stdout/stderr (prints, warnings, tracebacks) to the rule's log file.

    Snakemake runs a ``script:`` as its own Python process and fails the job on a non-zero exit. An
    error tokenwatt expects (its own exceptions, whose messages name the key or file and the fix; a
    full disk) ends that process with exit status 1 and one sentence on the terminal, the traceback
    kept in the log; any other exception is a bug and propagates, its traceback on the terminal too.
    """
    terminal = sys.stderr  # before the redirect: where the user looks
    sentence = None
    try:
        Path(log_path).parent.mkdir(parents=True, exist_ok=True)
        fh = open(log_path, "w", buffering=1, encoding="utf-8")
    except OSError as err:  # no log to keep a traceback in: a full disk is still said in words
        from .failures import explain

        if (sentence := explain(err)) is None:
            raise
        print(f"tokenwatt: {sentence}", file=terminal, flush=True)
        raise SystemExit(1) from None
    try:
        with contextlib.redirect_stdout(fh), contextlib.redirect_stderr(fh):
            try:
                yield
            except BaseException as err:
                import traceback

                from .failures import explain

                sentence = explain(err) if isinstance(err, Exception) else None
                with contextlib.suppress(OSError):  # the log's disk may be the full one
                    traceback.print_exc(file=fh)
                    if sentence is not None:
                        print(f"tokenwatt: {sentence}", file=fh)
                if sentence is None:
                    raise
    finally:
        with contextlib.suppress(OSError):
            fh.close()
    if sentence is not None:
        print(f"tokenwatt: {sentence} (the traceback is in {log_path})", file=terminal, flush=True)
        raise SystemExit(1)
