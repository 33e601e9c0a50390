"""File I/O helpers used by the thin scripts: atomic writes, checked reads of every file between rules, and
log redirection.

Every file one rule writes and another reads is read through a function of its kind here (``read_power_trace``,
``read_steps``, ``read_profile``, ``read_subset``, ...): a missing, truncated or damaged file is a
``DamagedFileError`` naming the file, what it should be and how to get it back, never a bare JSONDecodeError or
"parquet: File out of specification". polars is imported inside the readers: the Snakefile imports this module.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

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
    _atomic(
        path,
        lambda p: p.write_text(json.dumps(obj, indent=2, sort_keys=True, allow_nan=False) + "\n", encoding="utf-8"),
    )


def write_csv(path: str | Path, df: pl.DataFrame) -> None:
    _atomic(path, df.write_csv)


def write_text(path: str | Path, text: str) -> None:
    _atomic(path, lambda p: p.write_text(text, encoding="utf-8"))


def read_json(path: str | Path) -> Any:
    return json.loads(Path(path).read_text(encoding="utf-8"))


class DamagedFileError(ValueError):
    """A file between rules that is missing or cannot be read as what it should be: its path, what is wrong, the fix."""


RERUN = "delete it and rerun snakemake (with the --configfile you ran with): "
TRIAL_FIX = RERUN + "its trial is restored from the store, or trained again if the store has none"
PROFILE_FIX = RERUN + "the default target restores it from the store, or measures it again if the store has none"
SUBSET_FIX = RERUN + "the subset is drawn again (or restored from the store) when its trial next trains"
DATA_FIX = RERUN + "the data stage rebuilds it (or restores it from the store) when a job next needs it"
ANALYSIS_FIX = RERUN + "the analysis rebuilds it"

POWER_COLUMNS = ("t_s", "power_w")
STEPS_COLUMNS = ("step", "epoch", "tokens", "loss", "elapsed_s")
CURVE_COLUMNS = ("eval_loss",)
CHUNK_COLUMNS = ("chunk_id", "input_ids", "attention_mask", "n_real")
PROFILE_KEYS = ("cs_tflops", "median_tflops")
SUBSET_KEYS = ("budget", "trial", "chunk_ids", "n_chunks", "real_tokens")


def _first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return (text[0] if text else type(err).__name__)[:300]


def read_parquet_checked(
    path: str | Path, what: str, fix: str, required: tuple[str, ...] = (), columns: list[str] | None = None
) -> pl.DataFrame:
    """A Parquet table between rules, read whole (or ``columns``) and checked for its ``required`` columns."""
    import polars as pl

    if not Path(path).is_file():
        raise DamagedFileError(f"{path} is missing (the {what}); {fix}")
    try:
        table = pl.read_parquet(path, columns=columns)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as err:  # noqa: BLE001 - polars raises ComputeError, OSError, even a Rust panic for damaged bytes
        raise DamagedFileError(f"{path} is not a readable {what} (Parquet: {_first_line(err)}); {fix}") from None
    if missing := [c for c in required if c not in table.columns]:
        raise DamagedFileError(f"{path} is not a {what}: it has no column {', '.join(missing)}; {fix}")
    return table


def read_json_checked(path: str | Path, what: str, fix: str, required: tuple[str, ...] = ()) -> Any:
    """A JSON file between rules, checked to be an object with the ``required`` keys (when any are named)."""
    try:
        value = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DamagedFileError(f"{path} is missing (the {what}); {fix}") from None
    except (ValueError, UnicodeDecodeError) as err:  # JSONDecodeError is a ValueError
        raise DamagedFileError(f"{path} is not readable JSON ({_first_line(err)}); {fix}") from None
    if required:
        if not isinstance(value, dict):
            raise DamagedFileError(
                f"{path} is not a {what}: it holds a JSON {type(value).__name__}, not an object; {fix}"
            )
        if missing := [k for k in required if k not in value]:
            raise DamagedFileError(f"{path} is not a {what}: it lacks {', '.join(missing)}; {fix}")
    return value


def read_power_trace(path: str | Path) -> pl.DataFrame:
    """A trial's power.parquet (the meter's samples)."""
    return read_parquet_checked(path, "power trace", TRIAL_FIX, POWER_COLUMNS)


def read_steps(path: str | Path) -> pl.DataFrame:
    """A trial's steps.parquet (the training loss curve)."""
    return read_parquet_checked(path, "loss curve (training steps)", TRIAL_FIX, STEPS_COLUMNS)


def read_curve(path: str | Path) -> pl.DataFrame:
    """A trial's curve.parquet (its evaluation points)."""
    return read_parquet_checked(path, "eval curve", TRIAL_FIX, CURVE_COLUMNS)


def read_profile(path: str | Path) -> dict[str, Any]:
    """A device profile (profile.json: CS_TFLOPS and its windows)."""
    return read_json_checked(path, "device profile", PROFILE_FIX, PROFILE_KEYS)


def read_subset(path: str | Path) -> dict[str, Any]:
    """A trial's subset (the chunk ids of its budget, in training order)."""
    subset = read_json_checked(path, "trial subset", SUBSET_FIX, SUBSET_KEYS)
    if not isinstance(subset["chunk_ids"], list) or not all(isinstance(c, int) for c in subset["chunk_ids"]):
        raise DamagedFileError(f"{path} is not a trial subset: chunk_ids is not a list of chunk ids; {SUBSET_FIX}")
    return subset


def read_chunks(path: str | Path, columns: list[str] | None = None) -> pl.DataFrame:
    """A chunk table (chunks_train.parquet / chunks_eval.parquet), whole or only ``columns``."""
    return read_parquet_checked(path, "chunk table", DATA_FIX, tuple(columns) if columns else CHUNK_COLUMNS, columns)


def read_documents(path: str | Path) -> pl.DataFrame:
    """A document table of the data stage (corpus, normalized, docs_train, docs_eval)."""
    return read_parquet_checked(path, "document table", DATA_FIX, ("text",))


def read_tokenizer_info(folder: str | Path) -> dict[str, Any]:
    """The tokenizer folder's tokenwatt.json (what the trials need to know of the tokenizer)."""
    return read_json_checked(
        Path(folder) / "tokenwatt.json", "tokenizer description", DATA_FIX.replace("delete it", f"delete {folder}")
    )


def read_table(path: str | Path, what: str = "analysis table") -> pl.DataFrame:
    """An analysis output in Parquet (trials.parquet, curves.parquet)."""
    return read_parquet_checked(path, what, ANALYSIS_FIX)


def read_analysis_json(path: str | Path, what: str = "analysis output") -> Any:
    """An analysis output in JSON (stats, missing trials, cost, the profile check) or the data stage's summary."""
    return read_json_checked(path, what, ANALYSIS_FIX)


def write_parquet(path: str | Path, df: pl.DataFrame) -> None:
    _atomic(path, lambda p: df.write_parquet(p, compression="zstd", statistics=False))


# Set by the Snakefile's main process when Snakemake prints a failed job's log file itself (the rich logger always
# does; the plain one with --show-failed-logs): a job's sentence is then not printed a second time.
LOG_SHOWN_ENV = "TOKENWATT_LOG_SHOWN"


def traceback_file(log_path: str | Path) -> Path:
    """Where a job that failed on an expected error keeps what its log held and the traceback: beside the log
    (results/logs/corpus.log -> results/logs/corpus.traceback.log)."""
    log_path = Path(log_path)
    return log_path.with_name(f"{log_path.stem}.traceback{log_path.suffix}")


def job_label(rule: str, wildcards: Mapping[str, Any]) -> str:
    """How a failed job's sentence names the job: ``train_trial (cell b1000, trial 2)``, ``device_profile``."""
    named = [f"{key} {value}" for key, value in wildcards.items() if str(value).strip("/")]
    return f"{rule} ({', '.join(named)})" if named else rule


def _failure_line(sentence: str, kept: Path) -> str:
    return f"tokenwatt: {sentence} (the traceback is in {kept})"


def _keep_traceback(log_path: Path, sentence: str) -> str:
    """Move the log (the job's output, then its traceback) aside and leave the sentence as the whole log, so that a
    logger that prints a failed job's log prints the sentence only; returns the line the user reads (naming the log
    itself when the move or the new log cannot be written: the disk may be the full one)."""
    kept = traceback_file(log_path)
    try:
        os.replace(log_path, kept)
    except OSError:
        return _failure_line(sentence, log_path)
    try:
        log_path.write_text(_failure_line(sentence, kept) + "\n", encoding="utf-8")
    except OSError:
        os.replace(kept, log_path)
        return _failure_line(sentence, log_path)
    return _failure_line(sentence, kept)


@contextlib.contextmanager
def logged(log_path: str | Path, append: bool = False, job: str | None = None) -> Iterator[None]:
    """Send stdout/stderr (prints, warnings, tracebacks) to the rule's log file (``append``: after what an earlier
    block of the same job wrote there); ``job`` names the job in its failure's sentence (``job_label``).

    Snakemake runs a ``script:`` as its own Python process and fails the job on a non-zero exit. An
    error tokenwatt expects (its own exceptions, whose messages name the key or file and the fix; a
    full disk) ends that process with exit status 1 and one sentence: the log then holds that sentence
    alone, with the path of ``traceback_file`` (what the log held, and the traceback), and the terminal shows
    it once (printed here unless Snakemake prints the log itself, see LOG_SHOWN_ENV). Any other exception is
    a bug and propagates, its traceback kept in the log and on the terminal.
    """
    terminal = sys.stderr  # before the redirect: where the user looks
    log_path = Path(log_path)
    sentence = None
    try:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        if not append:  # an earlier failure's traceback would be read as this run's
            traceback_file(log_path).unlink(missing_ok=True)
        fh = open(log_path, "a" if append else "w", buffering=1, encoding="utf-8")
    except OSError as err:  # no log to keep a traceback in: a full disk is still said in words
        from .failures import explain, results_folder

        if (sentence := explain(err, results_folder(log_path))) is None:
            raise
        print(f"tokenwatt: {sentence}", file=terminal, flush=True)
        raise SystemExit(1) from None
    try:
        with contextlib.redirect_stdout(fh), contextlib.redirect_stderr(fh):
            try:
                yield
            except BaseException as err:
                import traceback

                from .failures import explain, results_folder

                sentence = explain(err, results_folder(log_path)) if isinstance(err, Exception) else None
                with contextlib.suppress(OSError):  # the log's disk may be the full one
                    traceback.print_exc(file=fh)
                if sentence is None:
                    raise
    finally:
        with contextlib.suppress(OSError):
            fh.close()
    if sentence is not None:
        line = _keep_traceback(log_path, f"{job}: {sentence}" if job else sentence)
        if os.environ.get(LOG_SHOWN_ENV) != "1":
            print(line, file=terminal, flush=True)
        raise SystemExit(1)
