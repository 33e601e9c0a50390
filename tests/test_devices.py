"""Trials on several devices (train.devices): N ranks of data-parallel training started by the torch launcher, each
metering its own device over windows that begin and end at barriers, the record summing their energy and keeping
each device's; the global batch and the subset the same for every N; what cannot be measured right is refused."""

import dataclasses
import json

import numpy as np
import polars as pl
import pytest
import torch
from fake_nvml import FakeNvml
from test_train import TOK, _chunks, _data, _model, _settings, _spec
from tokenwatt.analysis.quality import power_step
from tokenwatt.measurement.devices import visible_gpu_uuid
from tokenwatt.measurement.meter import MeterError
from tokenwatt.measurement.meters import MeterSettings, make_meter
from tokenwatt.plan import preflight
from tokenwatt.training.combine import combine_ranks
from tokenwatt.training.launch import run_on_devices
from tokenwatt.training.ranks import Ranks
from tokenwatt.training.spec import TrialData
from tokenwatt.training.train import evaluate, token_loss_sum
from tokenwatt.training.trial import run_trial

# one worker runs the module's tests, which read the module's fixtures computed once (conftest.py)
pytestmark = pytest.mark.xdist_group("two_ranks")


def _two_device_spec(**kw):
    """Two epochs of 7 steps each, a loss record every other step (the checkpoint tests stop between them)."""
    kw = {"epochs": 2, "log_every": 2, **kw}
    spec = _spec("estimate", {"points": 2, "first_fraction": 0.5}, batch_size=4, **kw)
    return dataclasses.replace(spec, train=dataclasses.replace(spec.train, devices=2))


def _write_inputs(folder):
    """The trial's data as the workflow's files: a 25-chunk subset (its last batch of 4 is one chunk, so one rank has
    none), its chunks, eval chunks and the tokenizer."""
    ids, mask = _data(n=41)
    chunks = _chunks(ids, mask)
    chunks[:33].write_parquet(folder / "train.parquet")
    chunks[33:].write_parquet(folder / "eval.parquet")
    subset = {"budget": 200, "trial": 1, "chunk_ids": list(range(25)), "n_chunks": 25}
    subset["real_tokens"] = int(mask[:25].sum())
    (folder / "subset.json").write_text(json.dumps(subset))
    (folder / "tokenizer").mkdir()
    (folder / "tokenizer" / "tokenwatt.json").write_text(json.dumps(TOK))
    paths = {"subset": "subset.json", "train": "train.parquet", "eval": "eval.parquet", "tokenizer": "tokenizer"}
    return {k: str(folder / v) for k, v in paths.items()}


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory):
    """One tiny trial trained twice on two gloo ranks, and once on one process."""
    folder = tmp_path_factory.mktemp("devices")
    inputs = _write_inputs(folder)
    spec = _two_device_spec()
    runs = [run_on_devices(spec, inputs, log=lambda line: None) for _ in range(2)]
    data = TrialData.read(type("Inputs", (), inputs))
    one = run_trial(dataclasses.replace(spec, train=dataclasses.replace(spec.train, devices=1)), data, lambda s: None)
    return runs, one, inputs


def test_two_ranks_train_bit_for_bit_the_same_on_a_rerun(two_ranks):
    (first, power, steps, curve), (again, _, steps_again, curve_again) = two_ranks[0]
    assert first["eval_loss"] == again["eval_loss"] and first["final_train_loss"] == again["final_train_loss"]
    assert steps["loss"].to_list() == steps_again["loss"].to_list()
    assert curve["eval_loss"].to_list() == curve_again["eval_loss"].to_list()


def test_two_ranks_train_the_one_device_trials_steps_and_tokens_to_its_loss(two_ranks):
    (two, _, steps, _), _ = two_ranks[0]
    one, _, one_steps, _ = two_ranks[1]
    assert (two["steps"], two["real_tokens"], two["batch_size"]) == (one["steps"], one["real_tokens"], 4)
    assert steps["tokens"].to_list() == one_steps["tokens"].to_list()
    # the same global batches and their token-weighted mean: equal up to the order of the sums
    np.testing.assert_allclose(steps["loss"].to_numpy(), one_steps["loss"].to_numpy(), rtol=1e-4)
    assert two["eval_loss"] == pytest.approx(one["eval_loss"], rel=1e-4)


def test_the_ranks_energies_sum_to_the_records_and_the_slowest_rank_is_its_time(two_ranks):
    (metrics, power, _, curve), _ = two_ranks[0]
    ranks = metrics["ranks"]
    assert metrics["devices"] == 2 and [r["rank"] for r in ranks] == [0, 1]
    assert all(r["energy_j"] > 0 for r in ranks)
    assert metrics["energy_j"] == pytest.approx(sum(r["energy_j"] for r in ranks), rel=1e-12)
    assert metrics["train_s"] == max(r["train_s"] for r in ranks)
    assert sorted(power["rank"].unique().to_list()) == [0, 1]
    # the curve's last point is the whole training: both devices' energy
    assert curve["train_energy_j"][-1] == pytest.approx(metrics["energy_j"], rel=1e-9)


def test_the_trials_rms_power_is_its_ranks_summed_trace_and_each_ranks_own_is_kept(two_ranks):
    (metrics, _, _, _), _ = two_ranks[0]
    each = [r["power_rms_w"] for r in metrics["ranks"]]
    assert metrics["power_rms_from"] == "summed_trace" and all(w > 0 for w in each)
    # at most the sum of each device's (to the 1 % the ranks' slightly different training spans allow)
    assert max(each) < metrics["power_rms_w"] <= sum(each) * 1.01


def test_every_rank_measured_the_same_windows_which_began_at_barriers(two_ranks):
    (metrics, power, _, _), _ = two_ranks[0]
    names = [w["name"] for w in metrics["windows"]]
    assert names[:3] == ["idle", "check_before", "train_1"] and "eval_1" in names and names[-1] == "eval_final"
    per_rank = power.partition_by("rank", as_dict=True)
    assert {tuple(sorted(set(p["window"].drop_nulls()))) for p in per_rank.values()} == {
        tuple(sorted(set(power["window"].drop_nulls())))
    }


def test_each_rank_evaluates_its_share_and_the_sums_make_the_whole_sets_loss():
    ids, mask = _data(n=10)
    model = _model()
    whole = evaluate(model, ids, mask, torch.device("cpu"), "fp32", 4)
    shares = [Ranks(r, 3).rows(0, len(ids)) for r in range(3)]
    assert [(s.start, s.stop) for s in shares] == [(0, 4), (4, 7), (7, 10)]
    sums = [token_loss_sum(model, ids[s], mask[s]) for s in shares]
    with torch.no_grad():
        total = sum(float(loss) for loss, _ in sums) / sum(int(n) for _, n in sums)
    assert total == pytest.approx(whole, rel=1e-6)


def test_a_share_of_a_batch_smaller_than_the_ranks_is_empty_for_the_last_rank():
    assert [Ranks(r, 2).rows(8, 9) for r in range(2)] == [slice(8, 9), slice(9, 9)]


def test_each_ranks_meter_reads_the_gpu_its_local_rank_maps_to_under_a_remapped_cuda_visible_devices():
    """CUDA_VISIBLE_DEVICES=3,1: local rank 0 trains on physical GPU 3 and rank 1 on GPU 1; each rank's meter must read
    its own (by UUID), never NVML's index 0 and 1."""
    gpus = {f"GPU-{i}{i}{i}": 100.0 + 50 * i for i in range(4)}  # NVML's order; each GPU its own constant power
    nvml = FakeNvml(gpus)
    settings = MeterSettings(kind="nvml", interval_s=0.02, cpu_tdp_w=65.0, rapl_root="/nonexistent")
    powers = []
    for local in range(2):
        meter, _ = make_meter(settings, "cuda", gpu_uuid=visible_gpu_uuid(nvml, local, "3,1"), nvml=nvml, ranks=2)
        meter.open()
        meter.window("train_1", 0.1)
        powers.append(meter.close().power_mean_w)
    assert powers == [gpus["GPU-333"], gpus["GPU-111"]]


def test_rapl_on_several_ranks_is_refused_and_auto_takes_each_ranks_estimate():
    settings = MeterSettings(kind="rapl", interval_s=0.1, cpu_tdp_w=65.0, rapl_root="/nonexistent")
    with pytest.raises(MeterError, match="each of 2 ranks would count"):
        make_meter(settings, "cpu", ranks=2)
    meter, why = make_meter(dataclasses.replace(settings, kind="auto"), "cpu", ranks=2)
    assert meter.reader.kind == "estimate" and "per rank" in why


def test_a_machine_with_fewer_devices_than_a_level_asks_for_is_refused_before_any_job():
    found = preflight.rank_devices({"cuda": 2, "cpu": 1}, cuda_count=1, cpus=8)
    assert len(found) == 1 and "asks for 2 devices on cuda" in found[0].sentence and "only 1 CUDA" in found[0].sentence
    assert preflight.rank_devices({"auto": 4}, cuda_count=0, cpus=2)[0].key == "train.devices"
    assert preflight.rank_devices({"auto": 2}, cuda_count=0, cpus=2) == []
    assert "one GPU" in preflight.rank_devices({"cuda:1": 2}, cuda_count=4, cpus=8)[0].sentence


def _rank_outputs(energy, train_s, samples):
    windows = [
        {
            "name": "train_1",
            "start_s": 0.0,
            "end_s": train_s,
            "duration_s": train_s,
            "energy_j": energy,
            "samples": samples,
            "note": "",
        }
    ]
    metrics = {
        "energy_j": energy,
        "train_s": train_s,
        "power_mean_w": None if energy is None else energy / train_s,
        "samples_with_power": samples,
        "windows": windows,
        "device_name": "cpu",
        "sample_error_messages": [],
        "eval_loss": 3.1,
    }
    trace = pl.DataFrame({"t_s": [0.0, 1.0], "power_w": [10.0, 12.0], "window": ["train_1", "train_1"]})
    curve = pl.DataFrame({"train_energy_j": [energy], "eval_energy_j": [1.0], "train_s": [train_s], "eval_s": [0.5]})
    return metrics, trace, pl.DataFrame({"loss": [3.0]}), curve


def test_combining_ranks_sums_energy_takes_the_slowest_time_and_keeps_each_device():
    metrics, power, _, curve = combine_ranks([_rank_outputs(130.0, 10.0, 80), _rank_outputs(70.0, 12.5, 61)])
    assert metrics["energy_j"] == 200.0 and metrics["train_s"] == 12.5 and metrics["samples_with_power"] == 61
    assert metrics["power_mean_w"] == pytest.approx(13.0 + 5.6)
    assert [r["energy_j"] for r in metrics["ranks"]] == [130.0, 70.0]
    assert metrics["windows"][0]["energy_j"] == 200.0 and metrics["windows"][0]["duration_s"] == 12.5
    assert curve["train_energy_j"].to_list() == [200.0] and curve["train_s"].to_list() == [12.5]
    assert power.height == 4 and power["rank"].to_list() == [0, 0, 1, 1]


def test_a_missing_energy_on_one_rank_leaves_the_trials_energy_unknown_not_halved():
    metrics, _, _, _ = combine_ranks([_rank_outputs(130.0, 10.0, 80), _rank_outputs(None, 12.5, 61)])
    assert metrics["energy_j"] is None and metrics["windows"][0]["energy_j"] is None


def test_ranks_that_recorded_different_resumes_are_refused_not_paired_short():
    from tokenwatt.training.combine import combine_resumes

    resume = {"from_checkpoint": 1, "from_step": 4, "lost_energy_j": 2.0, "lost_train_s": 1.0, "lost_steps": 2}
    assert len(combine_resumes([[resume], [resume]])) == 1
    with pytest.raises(ValueError, match=r"\[2, 1\] resumes"):
        combine_resumes([[resume, resume], [resume]])


def test_a_power_step_on_either_device_is_the_trials():
    t = np.arange(0, 4, 0.05)
    steady = pl.DataFrame({"t_s": t, "power_w": np.full(len(t), 30.0), "window": ["train_1"] * len(t)})
    stepped = steady.with_columns(power_w=pl.when(pl.col("t_s") > 2).then(45.0).otherwise(30.0))
    trace = pl.concat([steady.with_columns(rank=pl.lit(0)), stepped.with_columns(rank=pl.lit(1))])
    assert power_step(trace, 0.5, 5) == pytest.approx(0.5)
    assert power_step(steady, 0.5, 5) == pytest.approx(0.0)


def test_settings_default_to_one_device():
    assert _settings().devices == 1


def test_auto_meters_every_trial_of_a_study_with_multi_device_trials_alike_one_device_trials_included(tmp_path):
    package = tmp_path / "intel-rapl:0"  # a readable RAPL, which a one-device study's auto would take
    package.mkdir()
    (package / "energy_uj").write_text("1000\n")
    (package / "max_energy_range_uj").write_text("262143328850\n")
    settings = MeterSettings(kind="auto", interval_s=0.1, cpu_tdp_w=65.0, rapl_root=str(tmp_path))
    assert make_meter(settings, "cpu")[0].reader.kind == "rapl"
    meter, why = make_meter(dataclasses.replace(settings, study_devices=2), "cpu")
    assert meter.reader.kind == "estimate" and "every trial of this study" in why


def test_every_rank_warms_a_compile_up_with_as_many_passes_in_the_shapes_it_trains():
    from tokenwatt.training.train import warmup_sizes

    # 25 chunks in batches of 8: full batches and a last one of 1, which rank 1 trains as its zero-weighted row
    assert [warmup_sizes(25, 8, Ranks(r, 2)) for r in range(2)] == [[1, 4], [1, 4]]
    assert [warmup_sizes(30, 8, Ranks(r, 2)) for r in range(2)] == [[3, 4], [3, 4]]
    assert [warmup_sizes(27, 8, Ranks(r, 2)) for r in range(2)] == [[2, 4], [1, 4]]
    assert warmup_sizes(25, 8) == [1, 8]


def test_a_failed_trial_ends_with_a_ranks_own_error_before_another_ranks_consequence_of_it(tmp_path):
    import os

    from tokenwatt.training.launch import OWN, _first_cause

    (tmp_path / "rank0.error").write_text("rank 0 of 2: Connection closed by peer")
    (tmp_path / "rank1.error").write_text(f"{OWN}rank 1 of 2: eval.max_tokens: the evaluation is too short")
    os.utime(tmp_path / "rank1.error", (1e9, 1e9))  # written later than rank 0's would not change the choice
    assert _first_cause(tmp_path, 2, "exit 1") == "rank 1 of 2: eval.max_tokens: the evaluation is too short"
    (tmp_path / "rank1.error").unlink()  # a rank the system killed writes nothing: the consequence, with the exit
    assert _first_cause(tmp_path, 2, "exit 1") == "rank 0 of 2: Connection closed by peer (exit 1)"


def test_ranks_on_devices_of_two_kinds_are_marked_for_the_reports_warning():
    a, b = _rank_outputs(130.0, 10.0, 80), _rank_outputs(70.0, 12.5, 61)
    assert combine_ranks([a, b])[0]["devices_differ"] is False
    b[0]["device_name"] = "NVIDIA A100"
    assert combine_ranks([a, b])[0]["devices_differ"] is True


# ---------------------------------------------------------------- a two-device trial stopped and resumed

# Loaded by every process the launcher starts (on PYTHONPATH, as Python's site hook): the ranks of the process that
# TOKENWATT_TEST_STOP names ("kill:<n>" or "term:<n>") stop at their first loss record after checkpoint n, both killed
# outright (SIGKILL: nothing after it runs), or the job asked to stop (SIGTERM to it, as SLURM's warning is sent).
STOPPER = """
import os, signal
if os.environ.get("TOKENWATT_TEST_STOP"):
    from tokenwatt.training.resume import Checkpoints
    how, number = os.environ["TOKENWATT_TEST_STOP"].split(":")
    beat = Checkpoints.beat

    def then_stop(self, step, train_s, energy_j, **pending):
        beat(self, step, train_s, energy_j, **pending)
        if self.number == int(number) and step > self.written[-1]["step"] and not pending:
            if how == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            elif self.ranks.rank == 1 and not self.stop_requested.is_set():
                os.kill(int(os.environ["TOKENWATT_TEST_JOB"]), signal.SIGTERM)

    Checkpoints.beat = then_stop
"""


def test_a_two_device_trial_killed_and_then_stopped_resumes_to_the_same_losses_with_each_ranks_lost_energy(
    two_ranks, tmp_path, monkeypatch
):
    import os
    import threading

    from tokenwatt.common.failures import JobStopped
    from tokenwatt.training.resume import CheckpointPlace
    from tokenwatt.training.train import TrainingError

    assert threading.current_thread() is threading.main_thread()  # where the job's signal handler is installed
    (whole, _, whole_steps, whole_curve), inputs = two_ranks[0][0], two_ranks[2]
    (tmp_path / "hook").mkdir()
    (tmp_path / "hook" / "sitecustomize.py").write_text(STOPPER)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path / "hook"), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("TOKENWATT_TEST_JOB", str(os.getpid()))
    spec = _two_device_spec(checkpoint_every=whole["real_tokens"] // 6)  # 5 checkpoints over 14 steps
    place = CheckpointPlace(tmp_path / "checkpoint", "a" * 64)
    run = lambda: run_on_devices(spec, inputs, log=lambda line: None, place=place)  # noqa: E731
    monkeypatch.setenv("TOKENWATT_TEST_STOP", "kill:1")
    with pytest.raises(TrainingError, match="exited with status"):
        run()
    assert sorted(p.name for p in place.folder.glob("heartbeat*")) == ["heartbeat.rank0.json", "heartbeat.rank1.json"]
    monkeypatch.setenv("TOKENWATT_TEST_STOP", "term:2")
    with pytest.raises(JobStopped, match=r"stopped by a signal at step \d+; its state was saved \(checkpoint \d"):
        run()
    monkeypatch.delenv("TOKENWATT_TEST_STOP")
    metrics, _, steps, curve = run()
    assert steps["loss"].to_list() == whole_steps["loss"].to_list()  # bit for bit, across both stops
    assert curve["eval_loss"].to_list() == whole_curve["eval_loss"].to_list()
    assert metrics["eval_loss"] == whole["eval_loss"]
    killed, stopped = metrics["resumes"]
    assert killed["from_checkpoint"] == 1 and stopped["from_checkpoint"] >= 3
    assert killed["lost_steps"] > 0 and stopped["lost_steps"] == 0  # the signal's checkpoint lost nothing
    # each rank's lost work and energy, the trial's their sum
    assert all(r["lost_energy_j"] > 0 and r["lost_train_s"] > 0 for r in killed["ranks"])
    assert killed["lost_energy_j"] == pytest.approx(sum(r["lost_energy_j"] for r in killed["ranks"]))
    assert metrics["lost_energy_j"] == pytest.approx(killed["lost_energy_j"] + stopped["lost_energy_j"])
    assert all(r["lost_energy_j"] > 0 for r in metrics["ranks"])
    assert metrics["checkpoints"] >= 5 and metrics["checkpoint_energy_j"] > 0
