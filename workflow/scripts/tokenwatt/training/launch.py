"""A trial on several devices (``train.devices``): its job starts one process per device with the torch launcher
(``torch.distributed.run``, torchrun's module, standalone on the job's node), each process trains and meters as a
rank (``ranks.py``), and the job makes their records the trial's (``combine.py``).

The job writes what the ranks need (the trial's spec and the paths of its inputs) to a work folder; each rank reads
them, joins the process group (NCCL on CUDA, gloo on a CPU), trains on its device (CUDA device ``LOCAL_RANK``: the
launcher numbers the job's visible devices, so a remapped CUDA_VISIBLE_DEVICES is followed, and the meter finds the
GPU by its UUID), and writes its outputs, or the sentence its error ended with, beside them. Run as
``python -m tokenwatt.training.launch FOLDER`` by the launcher only.

Checkpoints and a stable run's points hold every rank's state in one file (``checkpoint.gather_ranks``). A signal
that stops the job (SLURM's warning, ``kill``, Ctrl-C) is passed on to every rank, which saves at its next loss
record and stops, as a one-device trial does; the job waits for its ranks meanwhile, and so does the launcher.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import pickle
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import polars as pl

from ..common.failures import JobStopped, stop_with_a_sentence
from .combine import combine_ranks
from .ranks import Ranks
from .resume import CheckpointPlace
from .spec import TrialData, TrialSpec
from .train import TrainingError

JOB = "job.pkl"
OWN = "tokenwatt: "  # an error file's mark: the rank's own error, not a consequence of another rank's
# How long the launcher, itself stopped by a signal, waits for its ranks to save and stop before it kills them: as long
# as the SLURM profile's warning before the time limit (its own default, 30 s, is shorter than a large model's save).
SHUTDOWN_S = 300

Outputs = tuple[dict[str, Any], pl.DataFrame, pl.DataFrame, pl.DataFrame]


def _rank_file(folder: Path, rank: int, what: str) -> Path:
    return folder / f"rank{rank}.{what}"


def launcher_command(devices: int, folder: Path) -> list[str]:
    """torchrun's command for a trial of ``devices`` ranks on this node: standalone (a rendezvous on a free local
    port, so two jobs on one node never meet), no restarts (a failed rank fails the trial, which names it)."""
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nnodes=1",
        f"--nproc-per-node={devices}",
        "--max-restarts=0",
        "-m",
        "tokenwatt.training.launch",
        str(folder),
    ]


def run_on_devices(
    spec: TrialSpec,
    inputs: Mapping[str, str],
    log: Callable[[str], None] = print,
    place: CheckpointPlace | None = None,
    origin: Path | None = None,
) -> Outputs:
    """Train ``spec`` on ``spec.train.devices`` devices and return the trial's outputs as ``run_trial`` does: its
    ranks' records combined (``combine_ranks``). ``inputs``: the paths of the trial's data (``TrialData.read``'s
    names); ``place`` and ``origin`` as ``run_trial``'s: every rank keeps its part of the one checkpoint there. A rank
    that fails fails the trial with its own sentence; the launcher's output goes to ``log``."""
    t_start = time.perf_counter()
    outputs = launch(spec, {"inputs": dict(inputs), "place": place, "origin": origin}, log)
    metrics, power, steps, curve = combine_ranks(outputs)
    metrics["run_s"] = time.perf_counter() - t_start  # the job's, the launcher and every rank's start-up included
    return metrics, power, steps, curve


def stable_on_devices(
    spec: TrialSpec,
    inputs: Mapping[str, str],
    out: Path,
    point: int,
    place: CheckpointPlace | None = None,
    origin: Path | None = None,
) -> list[dict[str, Any]]:
    """A stretch of a stable run (``run_stable``) on ``spec.train.devices`` devices: every rank's state saved in the
    one point ``out``; each rank's ``run_stable`` result, in rank order. ``inputs``: ``TrialData.stable``'s."""
    job = {"inputs": dict(inputs), "place": place, "origin": origin, "stable": (out, point)}
    return launch(spec, job, print)


def launch(spec: TrialSpec, job: dict[str, Any], log: Callable[[str], None]) -> list[Any]:
    """Start ``spec.train.devices`` ranks on ``job`` (``rank_main``) and return each rank's outputs, in rank order."""
    devices = spec.train.devices
    with tempfile.TemporaryDirectory(prefix="tokenwatt-ranks-") as work:
        folder = Path(work)
        with open(folder / JOB, "wb") as fh:
            pickle.dump({"spec": spec, **job}, fh)
        package = str(Path(__file__).resolve().parents[2])  # the folder tokenwatt is in
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [package, os.environ.get("PYTHONPATH")])),
            # torchrun sets one thread per rank unless told; each rank trains with train.threads
            "OMP_NUM_THREADS": str(spec.train.threads),
            "PYTHONUNBUFFERED": "1",  # rank 0's lines reach the log as they happen, and survive a kill
            "TORCH_ELASTIC_SHUTDOWN_TIMEOUT": str(SHUTDOWN_S),
        }
        proc = subprocess.Popen(
            launcher_command(devices, folder), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
        )
        try:
            with _signals_passed_on(folder, devices) as stopped:
                assert proc.stdout is not None
                for line in proc.stdout:
                    log(line.rstrip("\n"))
                returncode = proc.wait()
        finally:  # a job stopped meanwhile (an error here) never leaves its ranks on the devices
            if proc.poll() is None:
                proc.terminate()  # torchrun passes it to the ranks and kills them after SHUTDOWN_S
                try:
                    proc.wait(timeout=SHUTDOWN_S + 30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        if returncode != 0:
            said = f"the launcher of its {devices} ranks exited with status {returncode} (its output is in this log)"
            cause = _first_cause(folder, devices, said) or f"{spec.name}: {said}"
            raise JobStopped(cause) if stopped else TrainingError(cause)
        outputs = []
        for rank in range(devices):
            with open(_rank_file(folder, rank, "pkl"), "rb") as fh:
                outputs.append(pickle.load(fh))
    return outputs


@contextlib.contextmanager
def _signals_passed_on(folder: Path, devices: int) -> Iterator[list[int]]:
    """While the ranks run: SIGTERM or SIGINT to this job is passed on to every rank (by the process id each wrote),
    which saves a checkpoint at its next loss record and stops (``resume.py``), and the job waits for them instead of
    stopping at once and leaving them to the launcher's kill (rank 0 logs it: a line from a signal handler here could
    cut into the one being written). Yields the signals received (the handlers before are restored after)."""
    got: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield got
        return

    def pass_on(signum: int, frame: object) -> None:
        got.append(signum)
        for rank in range(devices):
            with contextlib.suppress(OSError, ValueError):  # a rank not started yet, or gone
                os.kill(int(_rank_file(folder, rank, "pid").read_text()), signal.SIGTERM)

    before = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    for sig in before:
        signal.signal(sig, pass_on)
    try:
        yield got
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


def _first_cause(folder: Path, devices: int, said: str) -> str | None:
    """The sentence a failed trial ends with: a rank's own error (tokenwatt's, which names the key and the fix) before
    another rank's consequence of it (gloo's "connection closed by peer"), the earliest of each kind; a consequence
    alone (a rank killed by the system writes none) comes with ``said``, the launcher's exit."""
    found = [
        (p.stat().st_mtime, p.read_text()) for r in range(devices) if (p := _rank_file(folder, r, "error")).exists()
    ]
    own = sorted(f for f in found if f[1].startswith(OWN))
    if own:
        return own[0][1].removeprefix(OWN)
    return f"{sorted(found)[0][1]} ({said})" if found else None


def rank_main(folder: Path) -> None:
    """One rank: the launcher's environment says which; train, meter and write this rank's outputs."""
    import torch
    import torch.distributed as dist

    rank, world, local = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), int(os.environ["LOCAL_RANK"])
    _rank_file(folder, rank, "pid").write_text(str(os.getpid()))  # where the job passes a signal on
    stop_with_a_sentence()  # stopped outside training, a rank ends in its sentence; in training it saves first
    with open(folder / JOB, "rb") as fh:
        job = pickle.load(fh)
    spec: TrialSpec = job["spec"]
    cuda = spec.train.device.startswith("cuda") or (spec.train.device == "auto" and torch.cuda.is_available())
    if cuda:  # this rank's device: the launcher's local rank among the job's visible devices
        torch.cuda.set_device(local)
        spec = dataclasses.replace(spec, train=dataclasses.replace(spec.train, device=f"cuda:{local}"))
    dist.init_process_group("nccl" if cuda else "gloo")
    # rank 0 writes the trial's log lines; the others only their errors
    log = print if rank == 0 else (lambda line: None)
    try:
        outputs = _run_rank(spec, job, log, Ranks(rank, world))
    except Exception as err:
        own = type(err).__module__.startswith("tokenwatt")
        _rank_file(folder, rank, "error").write_text(f"{OWN if own else ''}rank {rank} of {world}: {err}")
        if not own:
            raise  # a bug, or another rank's failure seen from here: its traceback goes to the job's log
        raise SystemExit(1) from None
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
    with open(_rank_file(folder, rank, "pkl"), "wb") as fh:
        pickle.dump(outputs, fh)


def _run_rank(spec: TrialSpec, job: dict[str, Any], log: Callable[[str], None], ranks: Ranks) -> Any:
    """This rank's part of the job: a trial (``run_trial``) or a stretch of a stable run (``run_stable``)."""
    from .trial import run_stable, run_trial

    inputs, place, origin = SimpleNamespace(**job["inputs"]), job["place"], job["origin"]
    if job.get("stable") is None:
        return run_trial(spec, TrialData.read(inputs), log, place=place, origin=origin, ranks=ranks)
    out, point = job["stable"]
    return run_stable(spec, TrialData.stable(inputs, spec), out, point, log, place=place, origin=origin, ranks=ranks)


if __name__ == "__main__":
    rank_main(Path(sys.argv[1]))
