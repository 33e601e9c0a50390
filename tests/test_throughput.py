"""The device profile (CS_TFLOPS) and the per-trial checks: windows, median and spread."""

import pytest
import torch
from tokenwatt.measurement.throughput import measure_throughput, summarise, timed_windows


class FakeClock:
    """Each op advances time by the next duration in the list (cycled)."""

    def __init__(self, durations):
        self.t, self.durations, self.i = 0.0, durations, 0

    def __call__(self):
        return self.t

    def op(self):
        self.t += self.durations[self.i % len(self.durations)]
        self.i += 1


def test_each_window_runs_ops_until_it_is_long_enough_and_reports_tflops():
    clock = FakeClock([0.25])
    got = timed_windows(clock.op, 1e12, window_s=1.0, windows=3, clock=clock)
    assert got == [pytest.approx(4.0)] * 3  # 4 ops of 1 TFLOP in 1 s


def test_the_profile_is_the_median_of_the_windows_with_its_quartiles():
    clock = FakeClock([1.0, 1.0, 2.0, 1.0, 0.5])  # one op per window: 1, 1, 0.5, 1, 2 TFLOP/s
    summary = summarise(timed_windows(clock.op, 1e12, window_s=0.1, windows=5, clock=clock))
    assert summary["windows_tflops"] == pytest.approx([1.0, 1.0, 0.5, 1.0, 2.0])
    assert summary["median_tflops"] == pytest.approx(1.0)
    assert (summary["q25_tflops"], summary["q75_tflops"], summary["iqr_tflops"]) == pytest.approx((1.0, 1.0, 0.0))
    assert summary["windows"] == 5


def test_one_slow_window_moves_the_median_less_than_the_mean():
    summary = summarise([1.0] * 9 + [0.1])
    assert summary["median_tflops"] == 1.0
    assert summary["cv"] > 0.2


def test_every_window_is_synchronised_at_both_ends():
    calls = []
    clock = FakeClock([0.6])
    timed_windows(
        lambda: (calls.append("op"), clock.op()),
        1e12,
        window_s=1.0,
        windows=2,
        sync=lambda: calls.append("sync"),
        clock=clock,
    )
    assert calls == ["sync", "op", "sync", "op", "sync"] * 2


def test_a_real_cpu_profile_records_its_settings():
    got = measure_throughput(
        torch.device("cpu"), torch.float32, size=64, window_s=0.01, windows=3, warmup_s=0.01, sync=lambda: None
    )
    assert got["windows"] == 3 and got["median_tflops"] > 0
    assert (got["matmul_size"], got["dtype"], got["window_s"]) == (64, "float32", 0.01)


def test_the_device_profile_names_the_device_and_precision():
    from tokenwatt.measurement.throughput import profile_device

    got = profile_device(
        device_name="cpu",
        precision="fp32",
        threads=1,
        size=64,
        window_s=0.01,
        windows=3,
        warmup_s=0.0,
        log=lambda s: None,
    )
    assert got["cs_tflops"] == got["median_tflops"] > 0
    assert got["device"] == "cpu" and got["precision"] == "fp32" and got["device_uuid"] is None


def test_an_unsteady_profile_is_measured_again_and_the_steadiest_attempt_kept(monkeypatch):
    from tokenwatt.measurement import throughput

    cvs = iter([0.3, 0.05, 0.2])
    monkeypatch.setattr(
        throughput,
        "measure_throughput",
        lambda *a, **k: {**summarise([1.0, 1.0, 1.0]), "cv": next(cvs), "dtype": "float32"},
    )
    got = throughput.profile_device(
        device_name="cpu",
        precision="fp32",
        threads=1,
        size=64,
        window_s=0.01,
        windows=3,
        warmup_s=0.0,
        max_cv=0.1,
        attempts=3,
        log=lambda s: None,
    )
    assert got["attempts"] == 2 and got["attempt_cvs"] == [0.3, 0.05] and got["cv"] == 0.05


def test_a_gpu_profile_reads_power_temperature_and_clocks_around_its_windows(monkeypatch):
    import torch
    from fake_nvml import FakeNvml
    from tokenwatt.measurement import devices, throughput

    monkeypatch.setattr(devices, "gpu_uuid", lambda device, nvml: "GPU-a")  # torch here has no CUDA to ask
    said = []
    snapshot = throughput._nvml_snapshot(torch.device("cuda", 0), FakeNvml({"GPU-a": 100.0}), said.append)
    got = snapshot()
    assert said == []  # not "NVML unavailable": the reading is the profile's
    assert got["power_w"] == pytest.approx(100.0) and got["temperature_c"] is not None and got["sm_clock_mhz"]
