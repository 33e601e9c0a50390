"""WSD cooldowns branched from one stable run (train.schedule.branch_every): a budget's trial continues the stable
run's saved point and trains, on CPU bit for bit, what one uninterrupted run of its own would have; its energy and
time are the stable run's to the point plus its own, both metered; a stable run's divergence is every branch's."""

import dataclasses

import pytest
import torch
from test_train import TOK, _chunks, _data, _spec
from tokenwatt.data.subsets import draw_subset, stream_head
from tokenwatt.training.schedule import Schedule
from tokenwatt.training.spec import TrialData
from tokenwatt.training.trial import run_stable, run_trial

SEED = 5  # _spec's trial seed
EVERY = 120  # real tokens between the stable run's saved points
WARMUP = 0.02  # tokens per parameter: a warmup by size, the same in every stretch and branch


def _branch_spec(lr=3e-3, **kw):
    spec = _spec("estimate", {"points": 3, "first_fraction": 0.5}, batch_size=2, lr=lr, **kw)
    schedule = Schedule(kind="wsd", cooldown_fraction=0.25, warmup_tokens_per_parameter=WARMUP, branch_every=EVERY)
    return dataclasses.replace(spec, train=dataclasses.replace(spec.train, schedule=schedule, order="drawn"))


def _stable_spec(lr=3e-3):
    spec = _spec("estimate", None, batch_size=2, lr=lr)
    schedule = Schedule(kind="constant", warmup_tokens_per_parameter=WARMUP)
    return dataclasses.replace(spec, train=dataclasses.replace(spec.train, schedule=schedule, order="drawn"))


def _inputs(budget):
    ids, mask = _data(n=80)
    chunks = _chunks(ids, mask)
    data = lambda subset: TrialData(subset=subset, train_chunks=chunks, eval_chunks=chunks[64:], tokenizer=TOK)  # noqa: E731
    return data(draw_subset(chunks[:64], budget, SEED)), lambda tokens: data(stream_head(chunks[:64], tokens, SEED, 2))


def _stable(tmp_path, points, lr=3e-3):
    """The stable run's stretches to ``points``, each from the one before; the last point's file."""
    _, head = _inputs(1)
    before = None
    for point in range(1, points + 1):
        out = tmp_path / f"p{point}.pt"
        run_stable(_stable_spec(lr), head(point * EVERY), out, point, log=lambda s: None, origin=before)
        before = out
    return before


def test_a_branch_from_the_stable_runs_saved_point_trains_bit_for_bit_what_one_uninterrupted_run_trains(tmp_path):
    torch.set_num_threads(1)
    data, _ = _inputs(600)
    alone, _, alone_steps, alone_curve = run_trial(_branch_spec(), data, log=lambda s: None)
    origin = _stable(tmp_path, points=2)  # two stretches: 0 → 120 → 240 real tokens
    branched, power, steps, curve = run_trial(_branch_spec(), data, log=lambda s: None, origin=origin)
    assert branched["eval_loss"] == alone["eval_loss"] and branched["final_train_loss"] == alone["final_train_loss"]
    assert curve["eval_loss"].to_list() == alone_curve["eval_loss"].tail(curve.height).to_list()
    assert (branched["steps"], branched["real_tokens"]) == (alone["steps"], alone["real_tokens"])
    # the loss records: the stable run's (one more, where a stretch ended), then the branch's, same steps and losses
    assert steps["step"].to_list()[-3:] == alone_steps["step"].to_list()[-3:]
    point = branched["branch"]
    assert alone["branch"]["from_point"] == 0 and point["from_point"] == 2 and 240 <= point["from_real_tokens"] < 270
    assert point["cooldown_from_step"] == alone["branch"]["cooldown_from_step"] > point["from_step"]


def test_a_branchs_energy_and_time_are_the_stable_runs_to_its_point_plus_its_own(tmp_path):
    data, _ = _inputs(600)
    metrics, _, _, curve = run_trial(_branch_spec(), data, log=lambda s: None, origin=_stable(tmp_path, 2))
    point = metrics["branch"]
    training = [w for w in metrics["windows"] if w["name"].startswith("train")]
    # the first stretch's window, the second's (continuing point 1), the branch's own (continuing point 2)
    assert [w["name"] for w in training][:3] == ["train_1", "train_1.p1", "train_1.p2"]
    assert point["stable_energy_j"] == pytest.approx(training[0]["energy_j"] + training[1]["energy_j"], rel=1e-12)
    assert metrics["energy_j"] == pytest.approx(sum(w["energy_j"] for w in training), rel=1e-12)
    assert metrics["energy_j"] > point["stable_energy_j"] > 0 and metrics["train_s"] > point["stable_train_s"] > 0
    assert metrics["idle_seconds"] > 0  # the first stretch's idle baseline is the trial's
    assert curve["train_energy_j"].min() > point["stable_energy_j"]  # every point counts the stable run's joules


def test_a_stable_run_that_diverged_makes_the_branches_after_it_diverged_trials(tmp_path):
    data, _ = _inputs(600)
    origin = _stable(tmp_path, 2, lr=80.0)
    metrics, *_ = run_trial(_branch_spec(lr=80.0), data, log=lambda s: None, origin=origin)
    assert metrics["status"] == "diverged" and metrics["eval_loss"] is None
    assert metrics["diverged_at_step"] <= metrics["branch"]["from_step"]  # where the stable run diverged
    names = [w["name"] for w in metrics["windows"]]  # the stretch after the divergence trained no step
    assert len(names) == len(set(names))


def test_a_kill_of_a_branch_before_its_first_checkpoint_is_counted_from_the_point_it_continued(tmp_path, monkeypatch):
    from tokenwatt.training.resume import CheckpointPlace, Checkpoints

    data, _ = _inputs(600)
    origin = _stable(tmp_path, 2)
    place = CheckpointPlace(tmp_path / "own", "k" * 64)
    beat = Checkpoints.beat

    class Killed(Exception):
        pass

    def killed_later(self, step, train_s, energy_j, **pending):
        beat(self, step, train_s, energy_j, **pending)
        if step >= 15:  # past the point (step 10 or so), before the branch's end: no checkpoint of its own yet
            raise Killed

    with monkeypatch.context() as m:
        m.setattr(Checkpoints, "beat", killed_later)
        with pytest.raises(Killed):
            run_trial(_branch_spec(log_every=5), data, log=lambda s: None, place=place, origin=origin)
    metrics, *_ = run_trial(_branch_spec(log_every=5), data, log=lambda s: None, place=place, origin=origin)
    (resume,) = metrics["resumes"]
    point = metrics["branch"]
    assert (resume["from_checkpoint"], resume["from_step"]) == (0, point["from_step"])
    assert 0 < resume["lost_steps"] <= 15 - point["from_step"] and resume["lost_energy_j"] > 0
    assert resume["lost_train_s"] < metrics["train_s"] - point["stable_train_s"] + 1.0  # not the stable run's seconds


def test_a_cooldown_that_would_begin_after_the_last_step_is_refused_before_training():
    from test_train import _model, _settings
    from tokenwatt.training.train import TrainingError, train

    ids, mask = _data(n=8)
    schedule = Schedule(kind="wsd", cooldown_fraction=0.01, branch_every=EVERY)
    with pytest.raises(TrainingError, match="its cooldown .* begins after its last step"):
        train(_model(), ids, mask, torch.device("cpu"), _settings(epochs=1, schedule=schedule, order="drawn"))


def test_a_stretch_record_holds_what_a_branch_from_its_point_inherits(tmp_path):
    from tokenwatt.training.stretch import stretch_record

    _, head = _inputs(1)
    first, second = tmp_path / "p1.pt", tmp_path / "p2.pt"
    run_stable(_stable_spec(), head(EVERY), first, 1, log=lambda s: None)
    done = run_stable(_stable_spec(), head(2 * EVERY), second, 2, log=lambda s: None, origin=first)
    record = stretch_record(
        done["session"],
        series="",
        trial=SEED,
        point=2,
        real_tokens=done["real_tokens"],
        train_s=done["train_s"],
        diverged=done["diverged"],
    )
    metrics, *_ = run_trial(_branch_spec(), _inputs(600)[0], log=lambda s: None, origin=second)
    point = metrics["branch"]
    # the same windows and seconds: a total taking the stable run from its records counts what the branches hold
    assert record["energy_j"] == point["stable_energy_j"] > 0
    assert (record["train_s"], record["run_s"]) == (point["stable_train_s"], point["stable_run_s"])
    assert record["checkpoint_energy_j"] == metrics["checkpoint_energy_j"] == 0.0 and record["lost_energy_j"] == 0.0


def test_a_branched_trials_peak_memory_window_opens_with_no_copy_of_the_stable_runs_point_alive(tmp_path, monkeypatch):
    from test_checkpoint import _loaded_copies_at_the_peak_window

    data, _ = _inputs(600)
    origin = _stable(tmp_path, 1)
    loaded, alive = _loaded_copies_at_the_peak_window(monkeypatch)
    run_trial(_branch_spec(), data, log=lambda s: None, origin=origin)
    assert loaded and alive[-1] == 0 and len(alive) == 2  # opened again once the point was loaded and let go
