"""A multi-device trial's RMS power, which PE divides by: the RMS of the devices' summed power trace, lined up on one
clock at the barriers, over the samples each device's own RMS is over; never the sum of each device's RMS, which is
the total's only in lockstep. And ranks that metered one GPU are refused, since its energy would count twice."""

import numpy as np
import polars as pl
import pytest
from fake_nvml import FakeNvml
from tokenwatt.measurement.cpu_meters import EstimateReader
from tokenwatt.measurement.energy import rms_of_sum
from tokenwatt.measurement.meter import Meter, Polling
from tokenwatt.measurement.nvml import NvmlReader
from tokenwatt.training.combine import combine_ranks
from tokenwatt.training.train import TrainingError

GPU_A = "GPU-aaaaaaaa-0000-0000-0000-000000000001"
GPU_B = "GPU-bbbbbbbb-0000-0000-0000-000000000002"
# Two training segments around an evaluation, as a trial meters them (seconds since the meter opened).
WINDOWS = (("idle", 0.0, 4.0), ("train_1", 4.0, 14.0), ("eval_1", 14.0, 16.0), ("train_2", 16.0, 26.0))


def _nvml_meter():
    # NVML's one-second average: the samples just after the evaluation settle and are left out of the power figures
    return Meter(NvmlReader(FakeNvml({GPU_A: 200.0}, has_instant=False), GPU_A), Polling(0.1))


def _session(meter, times, watts, clock_s=0.0):
    """One rank's outputs from a meter session with these samples (W at s), its clock ``clock_s`` ahead of rank 0's."""
    times = np.asarray(times, dtype=float) + clock_s
    windows = [(name, a + clock_s, b + clock_s) for name, a, b in WINDOWS]
    meter._errors, meter._thread_cpu_s, meter._interval_now = [], None, 0.1
    meter._windows = [{"name": n, "start_s": a, "end_s": b, "counter_j": None} for n, a, b in windows]
    label = [next((n for n, a, b in windows if a < t <= b), None) for t in times]
    trace = pl.DataFrame({"t_s": times, "power_w": np.asarray(watts, dtype=float), "window": label}).with_columns(
        *(pl.lit(None, pl.Float64).alias(c) for c in ("temperature_c", "sm_clock_mhz", "utilization_pct"))
    )
    out = meter._summarise(trace)
    curve = pl.DataFrame({"train_energy_j": [out.energy_j], "eval_energy_j": [0.0], "train_s": [20.0], "eval_s": [2.0]})
    return out.to_record(), out.trace, pl.DataFrame({"loss": [3.0]}), curve


def _square_wave(times, high_first):
    """Compute (300 W) and communication (150 W) alternating every second, starting with either."""
    high = (np.floor(np.asarray(times)) % 2 == 0) == high_first
    return np.where(high, 300.0, 150.0)


T = np.arange(0.0, 26.01, 0.1)


@pytest.mark.parametrize("meter", [_nvml_meter, lambda: Meter(EstimateReader(250.0), Polling(0.1))])
def test_one_device_summed_trace_gives_exactly_its_meters_own_rms(meter):
    rng = np.random.default_rng(5)
    times = np.sort(np.concatenate([T, rng.uniform(0, 26, 40)]))  # uneven: skipped and extra polls
    rank = _session(meter(), times, rng.uniform(150.0, 300.0, len(times)))
    metrics = combine_ranks([rank])[0]
    assert metrics["power_rms_from"] == "summed_trace"
    assert metrics["power_rms_w"] == pytest.approx(rank[0]["power_rms_w"], rel=1e-12)


def test_devices_out_of_phase_have_a_total_rms_below_the_sum_of_their_rms():
    ranks = [_session(Meter(EstimateReader(250.0), Polling(0.1)), T, _square_wave(T, first)) for first in (True, False)]
    metrics = combine_ranks(ranks)[0]
    each = [r[0]["power_rms_w"] for r in ranks]
    # 300 + 150 W at every instant: the total is a constant 450 W, where the RMS of each sums to 474 W
    assert metrics["power_rms_w"] == pytest.approx(450.0, rel=1e-3) and sum(each) == pytest.approx(474.3, rel=1e-3)


def test_devices_in_lockstep_have_a_total_rms_equal_to_the_sum_of_their_rms():
    ranks = [
        _session(Meter(EstimateReader(250.0), Polling(0.1)), T, _square_wave(T, True) * scale) for scale in (1.0, 0.8)
    ]
    metrics = combine_ranks(ranks)[0]
    assert metrics["power_rms_from"] == "summed_trace"
    assert metrics["power_rms_w"] == pytest.approx(sum(r[0]["power_rms_w"] for r in ranks), rel=1e-9)


def test_ranks_whose_meters_opened_apart_are_lined_up_at_their_barriers():
    late = _session(Meter(EstimateReader(250.0), Polling(0.1)), T, _square_wave(T, False), clock_s=3.7)
    metrics = combine_ranks([_session(Meter(EstimateReader(250.0), Polling(0.1)), T, _square_wave(T, True)), late])[0]
    assert metrics["power_rms_w"] == pytest.approx(450.0, rel=1e-3)


def test_the_sum_is_averaged_over_the_time_every_device_has_samples_for():
    one = (np.array([0.0, 5.0]), np.array([5.0, 10.0]), np.array([200.0, 200.0]))
    other = (np.array([5.0]), np.array([15.0]), np.array([250.0]))  # no samples before 5 s
    assert rms_of_sum([one, other]) == pytest.approx(450.0)
    assert rms_of_sum([one, (np.array([10.0]), np.array([15.0]), np.array([250.0]))]) is None


def test_traces_that_cannot_be_summed_give_the_sum_of_each_devices_rms_and_say_so():
    ranks = [_session(Meter(EstimateReader(250.0), Polling(0.1)), T, _square_wave(T, first)) for first in (True, False)]
    old = [(r[0], r[1].drop("in_power_stats"), *r[2:]) for r in ranks]  # a trace from before it said which count
    metrics = combine_ranks(old)[0]
    assert metrics["power_rms_from"] == "devices_sum"
    assert metrics["power_rms_w"] == pytest.approx(sum(r[0]["power_rms_w"] for r in ranks))


def _ranks_on(**uuids):
    ranks = [_session(Meter(EstimateReader(250.0), Polling(0.1)), T, _square_wave(T, True)) for _ in range(3)]
    for key, per_rank in uuids.items():
        for rank, uuid in zip(ranks, per_rank):
            rank[0][key] = uuid
    return ranks


def test_two_ranks_reporting_one_gpu_are_refused_naming_them_the_gpu_and_the_fix():
    ranks = _ranks_on(device_uuid=[GPU_A, GPU_B, GPU_A])
    with pytest.raises(TrainingError, match=f"ranks 0 and 2 .*GPU {GPU_A}.*CUDA_VISIBLE_DEVICES"):
        combine_ranks(ranks)


def test_ranks_on_mig_slices_of_one_gpu_are_refused_as_its_power_is_read_whole():
    ranks = _ranks_on(device_uuid=["MIG-1", "MIG-2", GPU_B], mig_parent_uuid=[GPU_A, GPU_A, None])
    with pytest.raises(TrainingError, match=f"ranks 0 and 1 .*GPU {GPU_A}"):
        combine_ranks(ranks)
