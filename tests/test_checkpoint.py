"""Checkpoints inside a trial: the training loop saved between two steps and resumed from the file goes on exactly as
the run that saved it, on CPU bit for bit; a checkpoint written for other settings is never resumed."""

import contextlib
import dataclasses

import pytest
import torch
from test_train import _data, _model, _settings
from tokenwatt.training import checkpoint
from tokenwatt.training.checkpoint import Checkpoint
from tokenwatt.training.train import Checkpointing, TrainHooks, train

KEY = "a" * 64


class Killed(Exception):
    """What a SIGKILL does to the process, in a test: nothing after it runs."""


def _run(tmp_path, due, kill_after=None, resume=None, epochs=2):
    """A run with pauses (as evaluations make) and checkpoints written to ``tmp_path`` where ``due`` says; the process
    is 'killed' right after checkpoint ``kill_after``. Returns the model, the result and the pauses it made."""
    torch.manual_seed(0)
    model, (ids, mask) = _model(), _data(n=48)
    pauses, written = [], []

    def save(state, tokens):
        written.append(state.step)
        checkpoint.save(tmp_path, Checkpoint(key=KEY, number=len(written), train=state))
        if kill_after == len(written):
            raise Killed

    result = train(
        model,
        ids,
        mask,
        torch.device("cpu"),
        _settings(epochs=epochs, log_every=5),
        hooks=TrainHooks(
            pause_at_tokens=[100, 300, 900],
            pause=lambda at: pauses.append((at["step"], at["real_tokens"])),
            checkpoints=Checkpointing(due=due, save=save),
        ),
        resume=resume,
    )
    return model, result, pauses, written


def _losses(result):
    return [(r["step"], r["tokens"], r["loss"]) for r in result.steps]


def test_a_run_resumed_from_its_checkpoint_goes_on_bit_for_bit(tmp_path):
    every_7 = lambda step, tokens: step % 7 == 0  # noqa: E731  off the loss records (every 5) and across epochs
    whole, whole_result, whole_pauses, _ = _run(tmp_path / "whole", every_7)
    with contextlib.suppress(Killed):
        _run(tmp_path / "killed", every_7, kill_after=2)
    saved, why = checkpoint.load(tmp_path / "killed", KEY)
    assert saved is not None and saved.train.step == 14 and why == ""
    resumed, resumed_result, resumed_pauses, _ = _run(tmp_path / "killed", every_7, resume=saved.train)
    assert _losses(resumed_result) == _losses(whole_result)  # the records before the checkpoint come from it
    still_to_come = [p for p in whole_pauses if p[0] > 14]
    assert still_to_come and resumed_pauses == still_to_come  # the evaluations after it, at the same steps
    assert resumed_result.real_tokens == whole_result.real_tokens and resumed_result.n_steps == whole_result.n_steps
    assert all(torch.equal(a, b) for a, b in zip(whole.state_dict().values(), resumed.state_dict().values()))


def test_a_checkpoint_at_an_epochs_last_batch_resumes_into_that_epochs_end(tmp_path):
    # 48 chunks in batches of 4: step 12 ends the first epoch, before its closing loss record (records every 5)
    at_12 = lambda step, tokens: step == 12  # noqa: E731
    _, whole_result, _, _ = _run(tmp_path / "whole", at_12)
    with contextlib.suppress(Killed):
        _run(tmp_path / "killed", at_12, kill_after=1)
    saved, _ = checkpoint.load(tmp_path / "killed", KEY)
    assert (saved.train.epoch, saved.train.start) == (0, 48)
    _, resumed_result, _, _ = _run(tmp_path / "killed", at_12, resume=saved.train)
    assert _losses(resumed_result) == _losses(whole_result)


def test_checkpoints_fall_where_the_real_tokens_reach_each_interval(tmp_path):
    every_150 = {"next": 150}

    def due(step, tokens):
        if tokens >= every_150["next"]:
            every_150["next"] += 150
            return True
        return False

    _, result, _, written = _run(tmp_path, due, epochs=1)
    tokens_at = {r["step"]: r["tokens"] for r in result.steps}
    assert len(written) == result.real_tokens // 150 >= 2
    assert all(tokens_at.get(s, 150 * (i + 1)) >= 150 * (i + 1) for i, s in enumerate(written))


def test_a_checkpoint_written_under_another_key_is_removed_and_never_resumed(tmp_path):
    with contextlib.suppress(Killed):
        _run(tmp_path, lambda step, tokens: step == 3, kill_after=1)
    saved, why = checkpoint.load(tmp_path, "b" * 64)
    assert saved is None and "written for other settings, inputs or code" in why
    assert not (tmp_path / checkpoint.STATE).exists()


def test_a_checkpoint_cut_short_is_removed_with_the_reason(tmp_path):
    tmp_path.mkdir(exist_ok=True)
    (tmp_path / checkpoint.STATE).write_bytes(b"PK\x03\x04 cut short")
    saved, why = checkpoint.load(tmp_path, KEY)
    assert saved is None and "could not be read" in why and not (tmp_path / checkpoint.STATE).exists()


# ---------------------------------------------------------------- a whole trial, killed and resumed


def _trial(place, meter="estimate", nvml=None, evaluation=None, **train):
    from test_train import TOK, _chunks, _spec
    from tokenwatt.training.spec import TrialData
    from tokenwatt.training.trial import run_trial

    ids, mask = _data(n=24)
    chunks = _chunks(ids, mask)
    subset = {"chunk_ids": list(range(16)), "n_chunks": 16, "real_tokens": int(mask[:16].sum())}
    data = TrialData(subset=subset, train_chunks=chunks, eval_chunks=chunks[16:], tokenizer=TOK)
    schedule = evaluation or {"points": 3, "first_fraction": 0.2}
    spec = _spec(meter, schedule, **{"epochs": 4, "checkpoint_every": 150, **train})
    return run_trial(spec, data, log=lambda s: None, nvml=nvml, place=place)


def _stop_after_checkpoint(monkeypatch, number, how):
    """The trial's process ends at the first heartbeat after checkpoint ``number``: killed outright (SIGKILL: nothing
    after it runs) or asked to stop (SIGTERM, as a scheduler does before its time limit)."""
    import os
    import signal

    from tokenwatt.training.resume import Checkpoints

    beat = Checkpoints.beat

    def then_stop(self, step, train_s, energy_j, **pending):
        beat(self, step, train_s, energy_j, **pending)
        if self.number == number and step > self.written[-1]["step"] and not self.stop_requested.is_set():
            if how == "kill":
                raise Killed
            os.kill(os.getpid(), signal.SIGTERM)

    monkeypatch.setattr(Checkpoints, "beat", then_stop)


def _killed_after_checkpoint(monkeypatch, place, number, times=1, **trial):
    """``times`` processes of the trial, each killed at its first heartbeat after checkpoint ``number``."""
    with monkeypatch.context() as m:
        _stop_after_checkpoint(m, number, "kill")
        for _ in range(times):
            with contextlib.suppress(Killed):
                _trial(place, **trial)


def _same_training(a, b):
    (ma, _, sa, ca), (mb, _, sb, cb) = a, b
    assert sa["loss"].to_list() == sb["loss"].to_list() and sa["step"].to_list() == sb["step"].to_list()
    assert ca["eval_loss"].to_list() == cb["eval_loss"].to_list() and ma["eval_loss"] == mb["eval_loss"]


def test_a_killed_trial_resumes_to_the_same_training_with_its_lost_work_recorded_apart(tmp_path, monkeypatch):
    from tokenwatt.common.records import check_record, load_validator
    from tokenwatt.training.resume import CheckpointPlace

    whole = _trial(CheckpointPlace(tmp_path / "whole", KEY))
    place = CheckpointPlace(tmp_path / "killed", KEY)
    _killed_after_checkpoint(monkeypatch, place, 2)
    resumed = _trial(place)
    _same_training(whole, resumed)
    metrics = resumed[0]
    assert (whole[0]["resumed"], metrics["resumed"]) == (0, 1) and metrics["resumes"][0]["from_checkpoint"] == 2
    assert metrics["lost_steps"] > 0 and metrics["lost_train_s"] > 0 and metrics["lost_energy_j"] > 0
    assert metrics["checkpoints"] == whole[0]["checkpoints"] >= 3 and metrics["checkpoint_energy_j"] > 0
    training = [w for w in metrics["windows"] if w["name"].startswith("train")]
    assert metrics["energy_j"] == sum(w["energy_j"] for w in training)  # the kept segments; the lost work apart
    assert [n for n in (w["name"] for w in metrics["windows"]) if n.startswith("checkpoint")] == [
        f"checkpoint_{n}" for n in range(1, metrics["checkpoints"] + 1)
    ]
    check_record(metrics, load_validator("workflow/schemas/metrics.schema.yaml"), "metrics.json")


def test_a_trial_killed_between_its_checkpoints_rename_and_heartbeat_resumes_from_it_with_that_windows_energy(
    tmp_path, monkeypatch
):
    from tokenwatt.training import resume
    from tokenwatt.training.resume import CheckpointPlace

    whole = _trial(CheckpointPlace(tmp_path / "whole", KEY))
    place = CheckpointPlace(tmp_path / "killed", KEY)
    commit = resume.store.commit

    def renamed_then_killed(folder, staged):
        commit(folder, staged)
        if checkpoint.load(folder, KEY)[0].number == 2:
            raise Killed  # the file is checkpoint 2; no heartbeat after the rename was written

    with monkeypatch.context() as m:
        m.setattr(resume.store, "commit", renamed_then_killed)
        with contextlib.suppress(Killed):
            _trial(place)
    resumed = _trial(place)
    _same_training(whole, resumed)
    metrics = resumed[0]
    assert metrics["resumes"][0]["from_checkpoint"] == 2 and metrics["lost_steps"] == 0
    assert metrics["lost_energy_j"] is not None and metrics["lost_energy_j"] < 1e-3 * metrics["energy_j"]
    windows = {w["name"]: w for w in metrics["windows"]}
    assert windows["checkpoint_2"]["energy_j"] > 0  # the window the checkpoint was saved in, kept from the heartbeat
    assert metrics["checkpoints"] == whole[0]["checkpoints"]


def test_a_trial_asked_to_stop_saves_a_checkpoint_at_the_next_step_and_resumes_from_it(tmp_path, monkeypatch):
    from tokenwatt.common.failures import JobStopped
    from tokenwatt.training.resume import CheckpointPlace

    whole = _trial(CheckpointPlace(tmp_path / "whole", KEY))
    place = CheckpointPlace(tmp_path / "stopped", KEY)
    with monkeypatch.context() as m:
        _stop_after_checkpoint(m, 1, "term")
        try:
            _trial(place)
            raise AssertionError("the trial ran to its end")
        except JobStopped as err:
            assert "its state was saved (checkpoint 2" in str(err)
    resumed = _trial(place)
    _same_training(whole, resumed)
    assert resumed[0]["resumes"][0]["from_checkpoint"] == 2 and resumed[0]["lost_steps"] == 0


def test_a_trial_killed_before_its_first_checkpoint_starts_again_and_records_what_it_had_spent(tmp_path, monkeypatch):
    from tokenwatt.training.resume import CheckpointPlace, Checkpoints

    beat = Checkpoints.beat

    def killed(self, step, train_s, energy_j):
        beat(self, step, train_s, energy_j)
        if step > 0:
            raise Killed

    place = CheckpointPlace(tmp_path, KEY)
    with monkeypatch.context() as m:
        m.setattr(Checkpoints, "beat", killed)
        with contextlib.suppress(Killed):
            _trial(place, checkpoint_every=0)
    metrics = _trial(place, checkpoint_every=0)[0]
    assert metrics["resumed"] == 1 and metrics["resumes"][0]["from_checkpoint"] == 0 and metrics["lost_steps"] > 0


def test_a_trial_metered_by_nvml_resumes_from_its_checkpoint(tmp_path, monkeypatch):
    # the session's state is its own, never a reading of the NVML device (a reader once had a snapshot() of its own)
    from test_train import _on_a_fake_gpu
    from tokenwatt.training.resume import CheckpointPlace

    nvml, plain = _on_a_fake_gpu(monkeypatch), {"points": 0}
    whole = _trial(CheckpointPlace(tmp_path / "whole", KEY), meter="nvml", nvml=nvml, evaluation=plain)
    place = CheckpointPlace(tmp_path / "killed", KEY)
    _killed_after_checkpoint(monkeypatch, place, 2, meter="nvml", nvml=nvml, evaluation=plain)
    resumed = _trial(place, meter="nvml", nvml=nvml, evaluation=plain)
    _same_training(whole, resumed)
    metrics = resumed[0]
    assert metrics["meter"] == "nvml-energy" and metrics["resumed"] == 1 and metrics["lost_energy_j"] > 0
    training = [w for w in metrics["windows"] if w["name"].startswith("train")]
    assert metrics["energy_j"] == sum(w["energy_j"] for w in training) > 0


def test_two_kills_without_a_checkpoint_between_them_are_both_recorded(tmp_path, monkeypatch):
    from tokenwatt.training.resume import CheckpointPlace

    place = CheckpointPlace(tmp_path, KEY)
    _killed_after_checkpoint(monkeypatch, place, 2, times=2)  # the first process, and the resumed one before its next
    metrics = _trial(place)[0]
    assert metrics["resumed"] == 2 and [r["from_checkpoint"] for r in metrics["resumes"]] == [2, 2]
    assert metrics["lost_steps"] == sum(r["lost_steps"] for r in metrics["resumes"]) and all(
        r["lost_steps"] > 0 for r in metrics["resumes"]
    )


def test_a_checkpoint_measured_on_another_device_is_not_continued_and_the_trial_starts_again(tmp_path, monkeypatch):
    import tokenwatt.training.session as session
    from tokenwatt.training.resume import CheckpointPlace

    whole = _trial(CheckpointPlace(tmp_path / "whole", KEY))
    place = CheckpointPlace(tmp_path / "killed", KEY)
    _killed_after_checkpoint(monkeypatch, place, 2)
    spent = checkpoint.read_heartbeat(place.folder)["energy_j"]  # the stopped process's session energy at its kill
    monkeypatch.setattr(session, "device_name", lambda device: "another CPU")
    again = _trial(place)
    _same_training(whole, again)  # from its first step, the same training
    (resume,) = again[0]["resumes"]
    assert resume["from_checkpoint"] == 0 and "another CPU" in resume["why"]
    # everything the stopped process did is lost: all its steps up to where it was killed, and their energy
    second = whole[2].filter(whole[2]["tokens"] >= 300)["step"][0]  # checkpoint 2 falls at the 300th real token
    assert resume["lost_steps"] > second - 4  # records every 4 steps
    # its saved windows, the checkpoint's own window (which only the heartbeat holds: ~7 % of it here, left out before)
    # and the work after it; the windows' fixed integrals and the heartbeat's running one differ by a few 0.1 %
    assert resume["lost_energy_j"] == pytest.approx(spent, rel=0.02)
    assert again[0]["checkpoints"] == whole[0]["checkpoints"]  # counted again from the first


def _loaded_copies_at_the_peak_window(monkeypatch):
    """Whether the weights and optimizer state read from a saved file (a checkpoint, a stable run's point) are still
    alive, at each opening of the peak memory window: a list, one entry per opening, of the copies alive then."""
    import weakref

    import tokenwatt.training.session as session

    read, start = checkpoint.read, session.PeakMemory.start
    loaded, alive = [], []

    def tensors(value):
        if isinstance(value, torch.Tensor):
            yield value
        elif isinstance(value, dict):
            for v in value.values():
                yield from tensors(v)
        elif isinstance(value, (list, tuple)):
            for v in value:
                yield from tensors(v)

    def read_and_watch(path):
        saved = read(path)
        loaded.extend(weakref.ref(t) for t in tensors([saved.train.model, saved.train.optimizer]))
        return saved

    def start_and_count(self):
        alive.append(sum(ref() is not None for ref in loaded))
        start(self)

    monkeypatch.setattr(checkpoint, "read", read_and_watch)
    monkeypatch.setattr(session.PeakMemory, "start", start_and_count)
    return loaded, alive


def test_a_resumed_trials_peak_memory_window_opens_with_no_copy_of_the_loaded_checkpoint_alive(tmp_path, monkeypatch):
    from tokenwatt.training.resume import CheckpointPlace

    whole = _trial(CheckpointPlace(tmp_path / "whole", KEY))
    place = CheckpointPlace(tmp_path / "killed", KEY)
    _killed_after_checkpoint(monkeypatch, place, 2)
    loaded, alive = _loaded_copies_at_the_peak_window(monkeypatch)
    resumed = _trial(place)
    _same_training(whole, resumed)
    # the fused AdamW copies the loaded moments into its own tensors: once loaded, no tensor read from the file is
    # left, and the window opens again there (its last opening), so the peak is the training's, not the copy's
    assert loaded and alive[-1] == 0 and len(alive) == 2
    assert resumed[0]["peak_memory_method"] == "vmhwm-reset-at-training"


def test_an_unreadable_checkpoint_starts_the_trial_again_with_its_earlier_work_recorded_as_lost(tmp_path, monkeypatch):
    from tokenwatt.training.resume import CheckpointPlace

    whole = _trial(CheckpointPlace(tmp_path / "whole", KEY))
    place = CheckpointPlace(tmp_path / "killed", KEY)
    _killed_after_checkpoint(monkeypatch, place, 2)
    spent = checkpoint.read_heartbeat(place.folder)  # the stopped process's session at its kill
    (place.folder / checkpoint.STATE).write_bytes(b"PK\x03\x04 cut short")  # a full disk, a crash mid-write
    again = _trial(place)
    _same_training(whole, again)  # from its first step, the same training
    (resume,) = again[0]["resumes"]
    assert resume["from_checkpoint"] == 0 and "could not be read" in resume["why"]
    # everything the stopped process did is lost, from its heartbeat, which the unreadable file's removal kept
    assert (resume["lost_steps"], resume["lost_train_s"]) == (spent["step"], spent["train_s"]) and spent["step"] > 0
    assert resume["lost_energy_j"] == spent["energy_j"] > 0
    assert again[0]["lost_energy_j"] == spent["energy_j"] and again[0]["resumed"] == 1


def test_an_unreadable_checkpoint_without_a_heartbeat_records_its_lost_work_as_unknown_not_zero(tmp_path):
    from tokenwatt.training.resume import CheckpointPlace, Checkpoints

    tmp_path.mkdir(exist_ok=True)
    (tmp_path / checkpoint.STATE).write_bytes(b"PK\x03\x04 cut short")
    kept = Checkpoints(CheckpointPlace(tmp_path, KEY), 150, False, lambda s: None)
    assert kept.resume() is None
    (resume,) = kept.resumes
    assert {k: resume[k] for k in ("lost_energy_j", "lost_train_s", "lost_steps")} == dict.fromkeys(
        ("lost_energy_j", "lost_train_s", "lost_steps")
    )
    assert kept.record()["lost_energy_j"] is None and kept.record()["resumed"] == 1


def _second_rank(said):
    """Rank 1 of two, told by ``said`` what rank 0 broadcasts (in order; then this rank's own value, as where the
    ranks agree); a flag is true on any rank where it is on this one."""
    from tokenwatt.training.ranks import Ranks

    class Second(Ranks):
        def from_first(self, value):
            return said.pop(0) if said else value

        def any(self, flag):
            return flag

        def barrier(self):
            pass

    return Second(rank=1, world=2)


def _two_rank_checkpoint(folder):
    from tokenwatt.training.checkpoint import BeforeTraining, SessionState, TrainState

    before = BeforeTraining("cpu", "estimate", {}, False, 0.0, [])
    session = SessionState(before=before, meter={"windows": []})
    mine = lambda step: Checkpoint(key=KEY, number=1, train=TrainState(step=step), session=session)  # noqa: E731
    checkpoint.save(folder, dataclasses.replace(mine(3), peers=(mine(3),)))


def test_rank_zero_decides_whether_the_ranks_resume_and_only_it_removes_a_stale_checkpoint(tmp_path):
    from tokenwatt.training.resume import CheckpointPlace, Checkpoints

    _two_rank_checkpoint(tmp_path)
    ranks = lambda *said: _second_rank(list(said))  # noqa: E731
    place = CheckpointPlace(tmp_path, KEY)
    # rank 0 found it stale (and removes it): rank 1 starts afresh too, though it still sees the file, and leaves it
    stale = (False, "the checkpoint was written for other settings, inputs or code; it was removed", False)
    assert Checkpoints(place, 150, False, lambda s: None, ranks=ranks(stale)).resume() is None
    assert (tmp_path / checkpoint.STATE).exists()
    # rank 0 resumes: rank 1 reads the same file and resumes at the same step
    resumed = Checkpoints(place, 150, False, lambda s: None, ranks=ranks((True, "", False))).resume()
    assert resumed is not None and resumed.train.step == 3
    # rank 0 read it, rank 1 cannot: unreadable on every rank, the lost work recorded (unknown here: no heartbeat)
    (tmp_path / checkpoint.STATE).write_bytes(b"cut short")
    kept = Checkpoints(place, 150, False, lambda s: None, ranks=ranks((True, "", False)))
    assert kept.resume() is None and "could not read" in kept.resumes[0]["why"]
    assert kept.resumes[0]["lost_steps"] is None
