import dataclasses
import time

import polars as pl
import pytest
from fake_nvml import FakeNvml
from tokenwatt.measurement.cpu_meters import EstimateReader, RaplReader
from tokenwatt.measurement.devices import visible_gpu_uuid
from tokenwatt.measurement.meter import Meter, MeterError, NullReader, Polling
from tokenwatt.measurement.meters import MeterSettings, make_meter
from tokenwatt.measurement.nvml import NvmlReader
from workflow_helpers import ROOT

GPU_A, GPU_B = "GPU-aaaaaaaa-0000-0000-0000-000000000001", "GPU-bbbbbbbb-0000-0000-0000-000000000002"


def _window(meter, seconds=0.3):
    meter.start()
    time.sleep(seconds)
    return meter.stop()


def test_nvml_energy_comes_from_the_counter():
    out = _window(Meter(NvmlReader(FakeNvml({GPU_A: 100.0}), GPU_A), Polling(0.05)))
    assert out.meter == "nvml-energy"
    assert out.energy_j == pytest.approx(100.0 * out.duration_s, rel=0.05)
    assert out.power_rms_w == pytest.approx(100.0) and out.power_max_w == 100.0
    assert out.temperature_max_c == 40 and out.device["power_limit_w"] == 300.0


def test_nvml_maps_the_device_by_uuid_not_by_index():
    fake = FakeNvml({GPU_A: 100.0, GPU_B: 250.0})
    out = _window(Meter(NvmlReader(fake, GPU_B), Polling(0.05)))
    assert out.power_mean_w == 250.0 and out.device["meter_device_uuid"] == GPU_B


def test_nvml_unknown_uuid_is_an_error():
    with pytest.raises(Exception, match="no GPU with UUID"):
        Meter(NvmlReader(FakeNvml({GPU_A: 100.0}), GPU_B), Polling(0.05))


def test_gpu_without_counter_integrates_polled_power_and_says_so():
    out = _window(Meter(NvmlReader(FakeNvml({GPU_A: 80.0}, has_counter=False), GPU_A), Polling(0.02)))
    assert out.meter == "nvml-power" and "no energy counter" in out.meter_note
    assert out.energy_j == pytest.approx(80.0 * out.duration_s, rel=0.15)


def test_nvml_error_mid_run_is_counted_not_dropped():
    fake = FakeNvml({GPU_A: 100.0})
    meter = Meter(NvmlReader(fake, GPU_A), Polling(0.02))
    fake.fail["nvmlDeviceGetPowerUsage"] = 3
    out = _window(meter)
    trace = out.trace  # the whole session: the poller's first sample may land just before the window opens
    assert trace["power_w"].drop_nulls().len() == 3
    assert out.sample_errors == trace.height - 3 > 0
    assert "GPU is lost" in out.sample_error_messages[0]


def test_counter_failing_at_the_end_falls_back_to_integration_and_relabels():
    fake = FakeNvml({GPU_A: 100.0})
    meter = Meter(NvmlReader(fake, GPU_A), Polling(0.02))
    fake.fail["nvmlDeviceGetTotalEnergyConsumption"] = 1  # the start read works, the end read fails
    out = _window(meter)
    assert out.meter == "nvml-power" and "integrated" in out.meter_note
    assert out.energy_j == pytest.approx(100.0 * out.duration_s, rel=0.15)


def test_sample_count_and_achieved_interval_are_recorded():
    out = _window(Meter(NvmlReader(FakeNvml({GPU_A: 100.0}), GPU_A), Polling(0.05)), seconds=0.5)
    assert 8 <= out.samples <= 13
    assert out.interval_achieved_s == pytest.approx(0.05, rel=0.3)
    assert out.trace.filter(out.trace["window"] == "train").height == out.samples


def _powercap(tmp_path, energy_uj, max_uj):
    zone = tmp_path / "intel-rapl:0"
    zone.mkdir(exist_ok=True)
    (zone / "energy_uj").write_text(str(energy_uj))
    (zone / "max_energy_range_uj").write_text(str(max_uj))
    sub = tmp_path / "intel-rapl:0:0"  # a subzone: must not be double-counted
    sub.mkdir(exist_ok=True)
    (sub / "energy_uj").write_text("0")
    return zone / "energy_uj"


def test_rapl_counts_across_a_wrap_around(tmp_path):
    counter = _powercap(tmp_path, 900_000, max_uj=1_000_000)
    meter = Meter(RaplReader(tmp_path), Polling(10))  # no polls in between: the window ends must handle the wrap
    meter.start()
    counter.write_text("300_000".replace("_", ""))  # +100 000 to the wrap, +300 000 after it
    out = meter.stop()
    assert out.meter == "rapl"
    assert out.energy_j == pytest.approx(0.4)


def test_rapl_without_domains_is_an_error(tmp_path):
    with pytest.raises(MeterError, match="no readable RAPL domains"):
        Meter(RaplReader(tmp_path), Polling(1))


def test_none_meter_reports_nulls_never_zero():
    out = _window(Meter(NullReader(), Polling(0.05)))
    assert out.meter == "none"
    assert out.energy_j is None and out.power_rms_w is None and out.power_mean_w is None


def test_estimate_is_labelled_an_estimate_that_is_work_based_and_load_dependent():
    out = _window(Meter(EstimateReader(65.0), Polling(0.05)))
    assert out.meter == "estimate" and out.meter_is_estimate is True
    assert "ESTIMATE" in out.meter_note and "work-based" in out.meter_note and "another load" in out.meter_note
    assert 0 <= out.power_max_w <= 65.0


def test_auto_on_a_cpu_without_rapl_picks_the_estimate_and_says_why(tmp_path):
    meter, why = make_meter(MeterSettings("auto", interval_s=0.1, cpu_tdp_w=65, rapl_root=str(tmp_path)), "cpu")
    assert isinstance(meter.reader, EstimateReader) and not (
        meter.reader.reads_temperature or meter.reader.coarse_counter
    )
    assert "ESTIMATE" in why and "rapl unavailable" in why


def test_auto_on_cuda_prefers_nvml():
    settings = MeterSettings("auto", interval_s=0.1, cpu_tdp_w=65, rapl_root="/nonexistent", target_samples=40)
    meter, why = make_meter(settings, "cuda", gpu_uuid=GPU_A, nvml=FakeNvml({GPU_A: 50.0}))
    assert isinstance(meter.reader, NvmlReader) and "nvml" in why
    assert meter.polling.target_samples == 40 and meter.reader.reads_temperature and meter.reader.coarse_counter


def test_explicit_meter_that_cannot_work_fails_clearly():
    with pytest.raises(MeterError, match="meter.kind is 'nvml'.*needs a CUDA device"):
        make_meter(MeterSettings("nvml", interval_s=0.1, cpu_tdp_w=65, rapl_root="/nonexistent"), "cpu")


def test_the_poller_does_not_slow_the_caller():
    """Starting, reading and stopping a meter never waits on a sample in progress."""
    meter = Meter(NvmlReader(FakeNvml({GPU_A: 100.0}), GPU_A), Polling(0.5))
    t0 = time.perf_counter()
    meter.start()
    meter.latest_power()
    meter.stop()
    assert time.perf_counter() - t0 < 0.2


GPU_C = "GPU-cccccccc-0000-0000-0000-000000000003"


@pytest.mark.parametrize(
    "visible,cuda_index,expected",
    [
        (None, 1, GPU_B),  # nothing hidden: CUDA index = NVML index
        ("2,0", 0, GPU_C),  # SLURM gave physical GPUs 2 and 0: CUDA 0 is NVML 2
        ("2,0", 1, GPU_A),
        (f"{GPU_B}", 0, GPU_B),  # visible devices given by UUID
    ],
)
def test_cuda_visible_devices_maps_to_the_physical_gpu(visible, cuda_index, expected):
    assert visible_gpu_uuid(FakeNvml({GPU_A: 1.0, GPU_B: 1.0, GPU_C: 1.0}), cuda_index, visible) == expected


def test_cooldown_waits_until_the_gpu_is_below_the_temperature(monkeypatch):
    import tokenwatt.training.session as session

    fake = FakeNvml({GPU_A: 100.0})
    temps = iter([70, 60, 44])
    fake.nvmlDeviceGetTemperature = lambda h, sensor: next(temps)
    monkeypatch.setattr(session.time, "sleep", lambda s: None)
    lines = []
    out = session.cooldown(
        Meter(NvmlReader(fake, GPU_A), Polling(0.1)), seconds=0, below_c=45, timeout_s=60, log=lines.append
    )
    assert out["cooldown_end_temperature_c"] == 44 and "44 °C" in lines[0]


def test_nvml_reads_instant_power_where_the_driver_offers_it():
    meter = Meter(NvmlReader(FakeNvml({GPU_A: 100.0}, has_instant=True), GPU_A), Polling(0.05))
    out = _window(meter)
    assert out.device["power_reading"] == "instant" and out.power_mean_w == pytest.approx(110.0)


def test_nvml_falls_back_to_the_averaged_reading_without_the_instant_field():
    out = _window(Meter(NvmlReader(FakeNvml({GPU_A: 100.0}, has_instant=False), GPU_A), Polling(0.05)))
    assert out.device["power_reading"] == "average" and out.power_mean_w == pytest.approx(100.0)


def test_nvml_meter_asks_the_trial_to_let_a_burst_fade_before_its_window():
    assert Meter(NvmlReader(FakeNvml({GPU_A: 100.0}), GPU_A), Polling(0.05)).reader.settle_s >= 1.0
    assert Meter(EstimateReader(65.0), Polling(0.05)).reader.settle_s == 0.0


def test_mean_and_rms_power_are_weighted_by_the_time_each_sample_stands_for():
    import polars as pl

    # Utilisation-style samples (each the mean since the previous): 10 W for 0.2 s, then, after a skipped poll, 100 W for 1 s.
    meter = Meter(EstimateReader(65.0), Polling(0.1))
    meter._errors, meter._thread_cpu_s = [], None
    meter._windows = [{"name": "train", "start_s": 0.0, "end_s": 1.2, "counter_j": None}]
    trace = pl.DataFrame(
        {"t_s": [0.0, 0.1, 0.2, 1.2], "power_w": [10.0, 10.0, 10.0, 100.0], "window": [None, "train", "train", "train"]}
    ).with_columns(
        temperature_c=pl.lit(None, pl.Float64),
        sm_clock_mhz=pl.lit(None, pl.Float64),
        utilization_pct=pl.lit(None, pl.Float64),
    )
    out = meter._summarise(trace)
    assert out.power_mean_w == pytest.approx((10 * 0.2 + 100 * 1.0) / 1.2)
    assert out.power_rms_w == pytest.approx(((100 * 0.2 + 10_000 * 1.0) / 1.2) ** 0.5)
    assert out.energy_j == pytest.approx(10 * 0.2 + 100 * 1.0)


def test_instant_readings_are_weighted_by_the_trapezoid_rule():
    from tokenwatt.measurement.energy import sample_weights

    assert list(sample_weights([0.0, 1.0, 3.0], "instant")) == [0.5, 1.5, 1.0]
    assert list(sample_weights([0.0, 1.0, 3.0], "previous")) == [0.0, 1.0, 2.0]


def test_estimated_power_does_not_depend_on_the_cores_the_process_may_use(monkeypatch):
    import os

    readings = []
    for allowed in ({0}, {0, 1}):
        monkeypatch.setattr(os, "sched_getaffinity", lambda pid, allowed=allowed: allowed)
        monkeypatch.setattr(os, "cpu_count", lambda: 2)
        meter = Meter(EstimateReader(65.0), Polling(0.05))
        clock = iter([(0.0, 0.0), (1.0, 1.0)])  # one CPU-second of work in one second
        monkeypatch.setattr(time, "monotonic", lambda: clock_now[0])
        monkeypatch.setattr(time, "process_time", lambda: clock_now[1])
        clock_now = next(clock)
        meter.reader._last = clock_now
        clock_now = next(clock)
        readings.append(meter.reader.sample()["power_w"])
    assert readings == [32.5, 32.5]  # half of the machine's two CPUs' TDP, under either affinity mask


def test_the_poller_shortens_its_interval_so_a_short_trial_gets_its_samples():
    from tokenwatt.measurement.meter import Pace

    meter = Meter(EstimateReader(65.0), Polling(0.2, target_samples=40))
    pace = Pace(planned=100)
    meter.start(pace)
    pace.started = time.monotonic()
    t0 = time.monotonic()
    while time.monotonic() - t0 < 0.4:  # a "trial" of 0.4 s, 100 steps
        pace.done = min(100, int((time.monotonic() - t0) / 0.004) + 1)
        time.sleep(0.001)
    out = meter.stop()
    assert out.samples_with_power >= 20  # at the configured 0.2 s it would get 3
    assert out.interval_final_s < 0.02 and out.interval_requested_s == 0.2


def test_the_poller_never_polls_faster_than_its_floor():
    from tokenwatt.measurement.meter import Pace

    meter = Meter(EstimateReader(65.0), Polling(0.2, target_samples=10_000))
    pace = Pace(planned=10)
    meter.start(pace)
    pace.started, pace.done = time.monotonic(), 10
    time.sleep(0.1)
    assert meter.stop().interval_final_s == meter.reader.min_interval_s


def _windows(meter, plan):
    """A session of back-to-back windows: ``plan`` is [(name, seconds)]."""
    meter.open()
    for i, (name, seconds) in enumerate(plan):
        meter.switch(name) if i else meter.begin(name)
        time.sleep(seconds)
    meter.end()
    return meter.close()


def test_counter_windows_add_up_to_the_counter_over_the_whole_session():
    fake = FakeNvml({GPU_A: 100.0})
    out = _windows(
        Meter(NvmlReader(fake, GPU_A), Polling(0.02)),
        [("idle", 0.1), ("train_1", 0.15), ("eval_1", 0.05), ("train_2", 0.15)],
    )
    windows = out.windows
    assert [w.name for w in windows] == ["idle", "train_1", "eval_1", "train_2"]
    span = windows[-1].end_s - windows[0].start_s
    assert sum(w.energy_j for w in windows) == pytest.approx(100.0 * span, rel=0.05)
    assert out.energy_j == pytest.approx(windows[1].energy_j + windows[3].energy_j)  # training: its segments
    assert out.eval_energy_j == pytest.approx(windows[2].energy_j)
    assert out.duration_s == pytest.approx(windows[1].duration_s + windows[3].duration_s)


def test_polled_windows_add_up_to_the_integral_over_the_whole_session():
    from tokenwatt.measurement.energy import integrate

    out = _windows(Meter(EstimateReader(65.0), Polling(0.02)), [("idle", 0.1), ("train_1", 0.2), ("eval_1", 0.1)])
    trace = out.trace.drop_nulls("power_w")
    whole = integrate(
        trace["t_s"].to_numpy(),
        trace["power_w"].to_numpy(),
        "previous",
        out.windows[0].start_s,
        out.windows[-1].end_s,
    )
    assert sum(w.energy_j for w in out.windows) == pytest.approx(whole, rel=1e-9)


def test_the_trace_says_which_window_each_sample_belongs_to():
    out = _windows(Meter(NvmlReader(FakeNvml({GPU_A: 100.0}), GPU_A), Polling(0.02)), [("idle", 0.1), ("train_1", 0.1)])
    labels = set(out.trace["window"].drop_nulls().to_list())
    assert labels == {"idle", "train_1"}


def test_a_window_shorter_than_the_sensors_update_period_is_said_to_be_so():
    out = _windows(
        Meter(NvmlReader(FakeNvml({GPU_A: 100.0}), GPU_A), Polling(0.02)), [("train_1", 0.2), ("eval_1", 0.01)]
    )
    short = {w.name: w.note for w in out.windows}
    assert (
        short["train_1"] == ""
        and "shorter (" in short["eval_1"]
        and "than the sensor's update period (100 ms)" in short["eval_1"]
    )
    assert out.short_windows == 1


def test_the_achieved_interval_is_measured_within_training_windows_not_across_the_pauses_between_them():
    meter = Meter(NvmlReader(FakeNvml({GPU_A: 100.0}), GPU_A), Polling(0.02))
    meter.open()
    meter.begin("train_1")
    time.sleep(0.2)
    meter.switch("eval_1")
    time.sleep(0.3)  # a long evaluation between two training segments
    meter.switch("train_2")
    time.sleep(0.2)
    meter.end()
    out = meter.close()
    assert out.interval_achieved_s == pytest.approx(0.02, rel=0.35)


def test_the_expected_training_time_leaves_out_what_came_before_training_and_the_pauses():
    from tokenwatt.measurement.meter import Pace

    pace = Pace(planned=100)
    pace.started, pace.done, pace.paused = time.monotonic() - 3.0, 10, 2.0  # 1 s of training for 10 steps
    assert pace.expected_s() == pytest.approx(10.0, rel=0.05)


def test_a_rapl_boundary_sample_stands_for_the_energy_since_the_previous_poll(tmp_path):
    counter = _powercap(tmp_path, 0, 10**12)
    meter = Meter(RaplReader(tmp_path), Polling(10.0))  # the poller's first sample only; the rest are window boundaries
    meter.open()
    counter.write_text(str(5_000_000))  # 5 J before the window opens
    time.sleep(0.1)
    meter.begin("train_1")
    counter.write_text(str(10_000_000))  # 5 J more inside it
    time.sleep(0.1)
    meter.end()
    out = meter.close()
    boundary = out.trace.filter(pl.col("window") == "train_1")["power_w"].to_list()
    assert boundary and boundary[-1] > 10  # ~5 J over ~0.1 s, never the microseconds after a counter read
    assert out.windows[0].energy_j == pytest.approx(5.0)


def test_power_just_after_an_evaluation_is_left_out_of_the_training_power_but_not_of_its_energy():
    fake = FakeNvml({GPU_A: 100.0}, has_counter=False)  # energy: the integral of the polled power
    meter = Meter(NvmlReader(fake, GPU_A), Polling(0.01))
    meter.reader.settle_s = 0.1  # an averaged reading that lags a tenth of a second (NVML's lags a second)
    meter.open()
    meter.begin("train_1")
    time.sleep(0.2)
    meter.switch("eval_1")
    fake.gpus[GPU_A] = 300.0  # evaluation draws more, and the reading still shows it as training resumes
    time.sleep(0.1)
    meter.switch("train_2")
    time.sleep(0.08)
    fake.gpus[GPU_A] = 100.0
    time.sleep(0.3)
    meter.end()
    out = meter.close()
    assert out.samples_settling > 0
    assert out.power_max_w == pytest.approx(100.0) and out.power_mean_w == pytest.approx(100.0)
    train_2 = next(w for w in out.windows if w.name == "train_2")
    assert train_2.energy_j > 100.0 * train_2.duration_s * 1.05  # the energy keeps what was drawn


def test_settling_samples_still_count_as_power_samples_and_an_instant_reading_has_none():
    for instant in (False, True):
        meter = Meter(NvmlReader(FakeNvml({GPU_A: 100.0}, has_instant=instant), GPU_A), Polling(0.01))
        meter.reader.settle_s = 0.1
        meter.open()
        meter.begin("train_1")
        time.sleep(0.15)
        meter.switch("eval_1")
        time.sleep(0.05)
        meter.switch("train_2")
        time.sleep(0.3)
        meter.end()
        out = meter.close()
        in_training = out.trace.filter(pl.col("window").str.starts_with("train"))["power_w"].drop_nulls().len()
        assert out.samples_with_power == in_training  # what quality.min_samples judges: every training sample
        assert (out.samples_settling > 0) != instant


MIG_A = "MIG-aaaaaaaa-1111-1111-1111-000000000001"


def test_a_mig_slice_is_metered_as_its_whole_gpu_and_says_so():
    meter = Meter(NvmlReader(FakeNvml({GPU_A: 100.0}, mig={MIG_A: GPU_A}), MIG_A), Polling(0.05))
    out = _window(meter)
    assert out.meter == "nvml-energy" and out.device["mig"] is True and out.device["mig_parent_uuid"] == GPU_A
    assert out.device["meter_device_uuid"] == MIG_A and "whole GPU" in out.meter_note


def test_a_whole_gpu_is_recorded_as_no_mig_slice():
    out = _window(Meter(NvmlReader(FakeNvml({GPU_A: 100.0}), GPU_A), Polling(0.05)))
    assert out.device["mig"] is False and out.device["mig_parent_uuid"] is None and out.meter_note == ""


@pytest.mark.parametrize("instant,source", [(True, "NVML_FI_DEV_POWER_INSTANT"), (False, "one-second average")])
def test_the_record_names_which_nvml_reading_power_came_from(instant, source):
    out = _window(Meter(NvmlReader(FakeNvml({GPU_A: 100.0}, has_instant=instant), GPU_A), Polling(0.05)))
    assert source in out.device["power_reading_source"]


def test_auto_on_cuda_refuses_to_fall_back_to_a_cpu_meter_when_nvml_fails(tmp_path):
    """A GPU trial measured by the CPU estimate would report the host's work as the GPU's energy."""
    with pytest.raises(MeterError, match="meter.kind is 'auto' on a CUDA device.*meter.kind: none"):
        make_meter(
            MeterSettings("auto", interval_s=0.1, cpu_tdp_w=65, rapl_root=str(tmp_path)),
            "cuda",
            gpu_uuid=GPU_B,  # not a GPU NVML knows
            nvml=FakeNvml({GPU_A: 50.0}),
        )


class _Props:
    def __init__(self, uuid: str) -> None:
        self.uuid = uuid


@pytest.mark.parametrize("torch_uuid,expected", [(GPU_A[4:], GPU_A), (MIG_A[4:], MIG_A)])
def test_the_cuda_device_uuid_takes_the_prefix_nvml_knows(monkeypatch, torch_uuid, expected):
    """torch reports a UUID without NVML's prefix; a MIG slice's is "MIG-…", not "GPU-…"."""
    import torch
    from tokenwatt.measurement.devices import gpu_uuid

    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: _Props(torch_uuid))
    fake = FakeNvml({GPU_A: 1.0}, mig={MIG_A: GPU_A})
    assert gpu_uuid(torch.device("cuda", 0), fake) == expected


def test_an_evaluation_shorter_than_ten_counter_updates_is_refused_by_key_with_the_tokens_that_would_do():
    from tokenwatt.measurement.energy import short_eval_window

    problem = short_eval_window(0.02, 4096, 0.1, "measured")
    assert problem.startswith("eval.max_tokens:") and "at least 204,800" in problem
    assert short_eval_window(1.0, 4096, 0.1, "measured") is None


def test_the_schemas_meter_kinds_are_the_meters_own_table():
    import yaml
    from tokenwatt.measurement.kinds import CPU_KINDS, KINDS

    schema = yaml.safe_load((ROOT / "workflow/schemas/config.schema.yaml").read_text())["properties"]
    assert set(schema["meter"]["properties"]["kind"]["enum"]) == set(KINDS)
    assert set(schema["selection"]["properties"]["meter"]["enum"]) == set(CPU_KINDS)


@pytest.mark.parametrize(("device", "kind"), [("cuda", "nvml"), ("cuda:1", "nvml"), ("cpu", "rapl")])
def test_auto_is_decided_in_one_place_for_the_config_check(device, kind):
    from tokenwatt.measurement.kinds import chosen_kind
    from tokenwatt.plan.config_rules import measures_with_nvml

    assert chosen_kind("auto", device) == kind and chosen_kind("estimate", device) == "estimate"
    config = {"meter": {"kind": "auto"}, "train": {"device": device}, "design": {}}
    assert measures_with_nvml(config) == (kind == "nvml")


def test_the_meter_a_trial_makes_under_auto_is_the_kind_the_config_check_assumed(tmp_path):
    from tokenwatt.measurement.kinds import auto_choice

    root = tmp_path / "powercap" / "intel-rapl:0"
    root.mkdir(parents=True)
    (root / "energy_uj").write_text("1000\n")
    (root / "max_energy_range_uj").write_text("262143328850\n")
    (root / "name").write_text("package-0\n")
    settings = MeterSettings(kind="auto", interval_s=0.1, cpu_tdp_w=100.0, rapl_root=str(tmp_path / "powercap"))
    cpu, _ = make_meter(settings, "cpu")
    gpu, _ = make_meter(settings, "cuda", gpu_uuid="GPU-a", nvml=FakeNvml({"GPU-a": 1.0}))
    assert (isinstance(cpu.reader, RaplReader), isinstance(gpu.reader, NvmlReader)) == (
        auto_choice("cpu") == "rapl",
        auto_choice("cuda") == "nvml",
    )


def test_a_new_meter_kind_is_its_reader_and_one_table_row(monkeypatch):
    """A kind added in this test alone, a reader class and one row of the table, is made by make_meter, metered over a
    window by the shared session, refused per rank where its row says so, and taken by auto where its row comes
    first for the device: nothing else of the library changes."""
    from tokenwatt.measurement import kinds
    from tokenwatt.measurement.meter import Reader

    class ConstantReader(Reader):
        kind = "constant"
        covers = "previous"

        def sample(self) -> dict[str, float]:
            return {"power_w": 42.0}

    row = kinds.MeterKind(
        "constant", "a steady 42 W", "cpu", False, lambda settings, place: ConstantReader(), "{ranks}"
    )
    monkeypatch.setitem(kinds.TABLE, "constant", row)
    settings = MeterSettings("constant", interval_s=0.02, cpu_tdp_w=65, rapl_root="/nonexistent")
    meter, why = make_meter(settings, "cpu")
    out = _window(meter, seconds=0.2)
    assert why == "meter.kind constant" and out.meter == "constant" and out.power_mean_w == pytest.approx(42.0)
    with pytest.raises(MeterError, match="meter.kind constant 2"):
        make_meter(settings, "cpu", ranks=2)
    # first in the table for the CPU, auto takes it there
    monkeypatch.setattr(kinds, "TABLE", {"constant": row, **kinds.TABLE})
    assert make_meter(dataclasses.replace(settings, kind="auto"), "cpu")[1] == "meter.kind auto chose constant"
