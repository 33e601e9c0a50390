"""The result store: every expensive job's outputs kept under a key of what they depend on, so a rerun
whose params and inputs match restores them instead of computing them again.

Snakemake deletes a job's outputs when the job starts. Without a copy elsewhere, a rerun that fails (a
config change whose trials must train again, with a value that fails in training) loses the finished
trial, and putting the config back trains it again; a failed corpus job makes every job below it run
again, every trial included, although each one's inputs come out byte for byte as before. So the
scripts of the expensive rules (tokenizer, chunk, subset, device_profile, train_trial) ask here first:

    key = sha256(rule, params, content of every input by its name)

The params carry the config values the job uses, the digest of its code (``codeclosure``) and its
identity (budget, trial, cell); an input counts by its content, never by its path or time, so a corpus
rebuilt with the same bytes keys the same tokenizer, chunks, subsets and trials. An entry is
``<root>/<rule>/<key[:2]>/<key>/``: the outputs (copies, never links: a hand edit or a truncation of
the readable file cannot reach the stored one), the job's log, and ``entry.json``, written last, with
every file's sha256. It is built in a temporary folder and renamed into place, so it is complete or
absent; an entry of the same key from before stays until the new one is complete. A restore checks
every file's sha256; a damaged entry is named, dropped and the job computes.

A job the user forces (``--forcerun``/``-R``, ``-F``, ``-f``: ``forced_spec``, put in ``TOKENWATT_FORCED`` by the
rule files' ``forced_jobs_noted`` while Snakemake builds the DAG) is computed again and replaces its entry: a trial
forced to be measured again is measured again. ``TOKENWATT_STORE`` names another folder (the key holds no path, so clones on
one machine may share one) or ``off``. Standard library only: a trial asks before it imports torch.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import sys
import time
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

STORE_ENV = "TOKENWATT_STORE"
FORCED_ENV = "TOKENWATT_FORCED"
# Part of every key: raise it when what a key covers changes, so no older entry is taken for a newer job.
VERSION = 1
ENTRY = "entry.json"
# Snakemake's marker in directory outputs, and the temporary files of tokenwatt's atomic writes.
SKIPPED = (".snakemake_timestamp",)
CHUNK = 1 << 20


class StoreError(ValueError):
    """A stored entry that cannot be used (named; the job then computes)."""


def store_root(results: str | os.PathLike) -> Path | None:
    """The store's folder: ``TOKENWATT_STORE``, else ``<results>/store``; None when ``TOKENWATT_STORE=off``."""
    chosen = os.environ.get(STORE_ENV, "").strip()
    if chosen.lower() in {"off", "0", "no", "false", "none"}:
        return None
    return Path(chosen or os.path.join(results, "store")).absolute()


def _skipped(name: str) -> bool:
    return name in SKIPPED or (name.startswith(".") and ".tmp" in name)


def _tree(path: Path) -> list[Path]:
    """The files of a directory output, sorted by their path inside it."""
    kept = (p for p in path.rglob("*") if p.is_file() and not any(_skipped(part) for part in p.relative_to(path).parts))
    return sorted(kept, key=lambda p: p.relative_to(path).as_posix())


def file_sha256(path: str | os.PathLike) -> str:
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def digest(path: str | os.PathLike) -> str:
    """The content of a file, or of a directory (each file's path inside it and content); never its time or place."""
    path = Path(path)
    if not path.is_dir():
        return file_sha256(path)
    h = hashlib.sha256(b"tree\0")
    for f in _tree(path):
        h.update(f"{f.relative_to(path).as_posix()}\0{file_sha256(f)}\0".encode())
    return h.hexdigest()


def job_key(rule: str, params: Mapping[str, Any], inputs: Mapping[str, str | os.PathLike]) -> str:
    """The key of a job: its rule, its params (canonical JSON) and the content of each input, by the input's name."""
    described = {
        "store": VERSION,
        "rule": rule,
        "params": dict(params),
        "inputs": {name: digest(path) for name, path in sorted(inputs.items())},
    }
    text = json.dumps(described, sort_keys=True, allow_nan=False, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def named_paths(files: Iterable[Any]) -> dict[str, str]:
    """A Snakemake input or output list as {name: path}: its names where it has them, else each file's position."""
    by_path = {}
    for name in getattr(files, "keys", lambda: [])():
        value = getattr(files, name)
        if isinstance(value, str):
            by_path.setdefault(str(value), name)
    return {by_path.get(str(f), str(i)): str(f) for i, f in enumerate(files)}


def forced_spec(forceall: bool, forcerun: Iterable[str], targets: Iterable[str], rules: Iterable[str]) -> str:
    """What the user forced, for ``TOKENWATT_FORCED`` (JSON): everything, rule names, output paths (``_from_workdir``).
    ``targets`` are the targets when ``-f`` forces them, else nothing."""
    names = set(rules)
    items = [*forcerun, *targets]
    return json.dumps(
        {
            "all": bool(forceall),
            "rules": sorted({i for i in items if i in names}),
            "files": sorted({_from_workdir(i) for i in items if i not in names}),
        }
    )


def _from_workdir(path: str) -> str:
    """Relative to the working directory when inside it (a node may mount the study's folder elsewhere), else absolute
    (a results folder elsewhere, say on scratch, is mounted in the same place on every node or on none)."""
    absolute = os.path.abspath(path)
    relative = os.path.relpath(absolute)
    return absolute if relative == os.pardir or relative.startswith(os.pardir + os.sep) else relative


def is_forced(rule: str, outputs: Iterable[str], spec: str | None = None) -> bool:
    """Whether the user forced this job (``forced_spec``; read from ``TOKENWATT_FORCED`` when not given)."""
    try:
        forced = json.loads(os.environ.get(FORCED_ENV, "") if spec is None else spec)
    except ValueError:
        return False
    if not isinstance(forced, dict):
        return False
    files = set(forced.get("files", ()))
    return bool(forced.get("all")) or rule in forced.get("rules", ()) or any(_from_workdir(o) in files for o in outputs)


def entry_dir(root: Path, rule: str, key: str) -> Path:
    return root / rule / key[:2] / key


def _copy_hashed(src: Path, dst: Path, expected: str | None = None) -> str:
    """Copy ``src`` to ``dst`` in one pass, returning the sha256; StoreError when it is not ``expected``."""
    h = hashlib.sha256()
    with open(src, "rb") as fi, open(dst, "wb") as fo:
        while block := fi.read(CHUNK):
            h.update(block)
            fo.write(block)
    found = h.hexdigest()
    if expected is not None and found != expected:
        raise StoreError(f"{src} differs from what was stored (sha256 {found[:12]}…, stored {expected[:12]}…)")
    return found


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def save(
    root: Path,
    rule: str,
    key: str,
    outputs: Mapping[str, str],
    log_text: str | None = None,
    about: Mapping[str, Any] | None = None,
) -> Path:
    """Store a finished job's outputs under its key (an older entry of the key is replaced once the new one is complete)."""
    final = entry_dir(root, rule, key)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = final.parent / f".tmp-{key[:16]}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        (tmp / "files").mkdir(parents=True)
        files: dict[str, Any] = {}
        for name, path in outputs.items():
            src = Path(path)
            stored = f"{name}{''.join(src.suffixes[-1:])}"
            if src.is_dir():
                listing = {}
                for f in _tree(src):
                    rel = f.relative_to(src).as_posix()
                    (tmp / "files" / stored / rel).parent.mkdir(parents=True, exist_ok=True)
                    listing[rel] = _copy_hashed(f, tmp / "files" / stored / rel)
                files[name] = {"kind": "directory", "stored": stored, "files": listing}
            else:
                files[name] = {"kind": "file", "stored": stored, "sha256": _copy_hashed(src, tmp / "files" / stored)}
        if log_text is not None:
            (tmp / "log.txt").write_text(log_text, encoding="utf-8")
        entry = {
            "version": VERSION,
            "rule": rule,
            "key": key,
            "files": files,
            "paths": dict(outputs),
            "stored_at": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
            **(dict(about) if about else {}),
        }
        (tmp / ENTRY).write_text(json.dumps(entry, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        if final.exists():  # the same key computed again (forced): the old entry goes once the new one is complete
            aside = final.parent / f".old-{key[:16]}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
            os.replace(final, aside)
            try:
                os.replace(tmp, final)
            except OSError:
                os.replace(aside, final)
                raise
            _remove(aside)
        else:
            try:
                os.replace(tmp, final)
            except OSError:
                if not (final / ENTRY).exists():  # another job stored the same key meanwhile: that one stands
                    raise
    finally:
        _remove(tmp)
    return final


def lookup(root: Path, rule: str, key: str) -> dict[str, Any] | None:
    """The entry of a key (its entry.json), or None when there is none; StoreError for one that cannot be read."""
    path = entry_dir(root, rule, key) / ENTRY
    if not path.exists():
        return None
    try:
        entry = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, OSError) as err:
        raise StoreError(f"{path} is unreadable ({err})") from None
    if not isinstance(entry, dict) or entry.get("key") != key or not isinstance(entry.get("files"), dict):
        raise StoreError(f"{path} does not describe the entry of key {key[:12]}…")
    return entry


def restore(
    root: Path, rule: str, key: str, outputs: Mapping[str, str], last: str | None = None
) -> dict[str, Any] | None:
    """Copy a stored entry's files into place (each checked against its sha256; ``last`` goes last: the file whose
    presence marks a finished job). None when the key has no entry; StoreError when the entry is damaged (it is
    dropped); OSError when a file could not be written into place (the entry stays)."""
    where = entry_dir(root, rule, key)
    try:
        entry = lookup(root, rule, key)
        if entry is None:
            return None
        if set(entry["files"]) != set(outputs):
            raise StoreError(f"{where} holds {sorted(entry['files'])}, the job writes {sorted(outputs)}")
        plan = []
        for name in sorted(outputs, key=lambda name: name == last):
            spec = entry["files"][name]
            src = where / "files" / str(spec["stored"])
            members = spec["files"].items() if spec["kind"] == "directory" else [("", spec["sha256"])]
            missing = [rel or src.name for rel, _ in members if not (src / rel if rel else src).is_file()]
            if missing:
                raise StoreError(f"{where} lacks {', '.join(missing[:3])}")
            plan.append((spec, src, Path(outputs[name])))
    except (KeyError, TypeError, AttributeError) as err:
        _remove(where)
        raise StoreError(f"{where} is not a complete entry ({type(err).__name__}: {err})") from None
    except StoreError:
        _remove(where)
        raise
    staged: list[tuple[Path, Path]] = []
    try:
        for spec, src, dst in plan:
            dst.parent.mkdir(parents=True, exist_ok=True)
            tmp = dst.with_name(f".{dst.name}.tmp-restore{os.getpid()}")
            _remove(tmp)
            staged.append((tmp, dst))
            if spec["kind"] == "directory":
                tmp.mkdir()
                for rel, sha in spec["files"].items():
                    (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
                    _copy_hashed(src / rel, tmp / rel, sha)
            else:
                _copy_hashed(src, tmp, spec["sha256"])
    except BaseException as err:
        for tmp, _ in staged:
            _remove(tmp)
        if isinstance(err, StoreError):
            _remove(where)
        raise
    for tmp, dst in staged:  # every file checked: into place, `last` last
        if dst.exists() or dst.is_symlink():
            _remove(dst)
        os.replace(tmp, dst)
    return entry


class JobStore:
    """The store as one rule's script sees it: ``restore()`` before computing, ``save()`` after."""

    def __init__(
        self,
        root: Path | None,
        rule: str,
        outputs: Mapping[str, str],
        key: str | None,
        forced: bool,
        log_path: str | None = None,
        last: str | None = None,
    ):
        self.root, self.rule, self.outputs, self.key, self.forced = root, rule, dict(outputs), key, forced
        self.log_path, self.last = log_path, last
        self.entry: dict[str, Any] | None = None

    @property
    def first(self) -> str:
        return self.outputs[self.last] if self.last in self.outputs else next(iter(self.outputs.values()))

    def restore(self) -> bool:
        """True when the job's outputs came from the store (the job then computes nothing). Prints to the job's log."""
        if self.root is None or self.key is None:
            print(f"store: off ({STORE_ENV}=off); computing")
            return False
        where = entry_dir(self.root, self.rule, self.key)
        if self.forced:
            print(f"store: this job was forced, so it computes again; its result replaces {where} once complete")
            return False
        try:
            self.entry = restore(self.root, self.rule, self.key, self.outputs, self.last)
        except StoreError as err:
            line = f"store: the stored result of this job was damaged and is dropped ({err}); computing it again"
            print(line)
            terminal(f"tokenwatt: {self.first}: {line}")
            return False
        except OSError as err:
            line = f"store: the stored result of this job could not be copied into place ({err}); computing it again"
            print(line)
            terminal(f"tokenwatt: {self.first}: {line}")
            return False
        if self.entry is None:
            print(f"store: no stored result for key {self.key[:16]}…; computing")
            return False
        print(
            f"store: restored from {where} (stored {self.entry.get('stored_at', '?')}); nothing was computed. "
            f"To compute it again: snakemake --forcerun {self.first}"
        )
        if (where / "log.txt").exists():
            print("--- the log of the run that computed it ---")
            print((where / "log.txt").read_text(encoding="utf-8", errors="replace"), end="")
        terminal(self.restored_line())
        return True

    def restored_line(self) -> str:
        when = self.entry.get("stored_at", "?") if self.entry else "?"
        done = "trained" if self.rule == "train_trial" else "computed"
        return f"↺ {self.first}: restored from the store (computed {when}), nothing {done}; to compute it again: --forcerun {self.first}"

    def save(self) -> None:
        """Keep the finished outputs; a failure here is a warning, never a failed job (the outputs are written)."""
        if self.root is None or self.key is None:
            return
        try:
            sys.stdout.flush()
            log = Path(self.log_path) if self.log_path else None
            log_text = log.read_text(encoding="utf-8", errors="replace") if log is not None and log.is_file() else None
            where = save(self.root, self.rule, self.key, self.outputs, log_text)
            print(f"store: kept in {where}")
        except Exception as err:  # noqa: BLE001 - the outputs are written; a store that fails must not fail the job
            line = (
                f"store: could not keep this job's outputs in {self.root} ({type(err).__name__}: {err}); they are "
                "written, but a failed rerun could lose them"
            )
            print(line)
            terminal(f"tokenwatt: {self.first}: {line}")


def terminal(line: str) -> None:
    """A line on the terminal (stderr as it was before the job's log took stdout and stderr)."""
    print(line, file=sys.__stderr__, flush=True)


def job_store(smk: Any, kind: str, last: str | None = None) -> JobStore:
    """The store for the running Snakemake script job ``smk`` (its rule, params, inputs, outputs, config, log).

    ``kind`` is what the job computes: its rule's name in tokenwatt's own rule files. It keys the entry, so a project
    that renames tokenwatt's rules (``use rule * from tokenwatt as tw_*``) shares entries with one that does not;
    forcing goes by the name the user sees and types (``smk.rule``)."""
    root = store_root(smk.config.get("results", "results"))
    outputs = named_paths(smk.output)
    key = job_key(kind, dict(smk.params.items()), named_paths(smk.input)) if root is not None else None
    log = str(smk.log[0]) if len(smk.log) else None
    if root is not None and FORCED_ENV not in os.environ:
        terminal(
            f"tokenwatt: {FORCED_ENV} is not in this job's environment, so it cannot know whether you forced it and "
            "may restore it from the store: run with an executor that passes the environment to jobs (local, SLURM)"
        )
    return JobStore(root, kind, outputs, key, is_forced(smk.rule, outputs.values()), log, last)
