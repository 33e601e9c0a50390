"""The design module: the config turned into cells, their settings and their paths."""

import copy
import math

import pytest
import yaml
from tokenwatt.plan.config import ConfigError, load_schema, validate_config
from tokenwatt.plan.design import JOB_TRAIN_KEYS, Design, cell_label, parse_cell, profile_key_of
from workflow_helpers import ROOT

SCHEMA = load_schema(ROOT / "workflow/schemas/config.schema.yaml")
DEFAULT = yaml.safe_load((ROOT / "config/config.yaml").read_text())
DEFAULT["study"]["budgets"] = [10000, 20000, 40000]  # these tests' own budgets, whatever the embedded default's


def _design(**design) -> Design:
    return Design(validate_config({**copy.deepcopy(DEFAULT), "design": design}, SCHEMA))


def test_a_one_factor_study_keeps_its_paths_and_settings():
    d = _design()
    assert [c.id for c in d.cells] == ["b10000", "b20000", "b40000"]
    assert d.keys()[:2] == [("b10000", 1), ("b10000", 2)] and len(d.keys()) == 15
    cell = d.cell("b10000")
    assert d.model_config(cell) == d.config["model"]
    # compile: auto resolved for the study (its 10K cell trains at least 471 steps, under 1000)
    trial_settings = {k: v for k, v in d.config["train"].items() if k not in JOB_TRAIN_KEYS}
    assert d.train_config(cell) == {**trial_settings, "compile": False}
    assert (d.profile_keys(), d.tokenizer_keys(), d.resources(cell)) == ([""], [""], {})


def test_every_cell_is_one_level_of_every_factor_with_a_readable_path():
    d = _design(
        model={"tiny": {"preset": "llama-tiny"}, "base": {"preset": "llama-small"}}, precision=["fp32", "bf16-mixed"]
    )
    assert len(d.cells) == 2 * 2 * 3
    assert d.cells[0].id == "model=tiny/precision=fp32/b10000"
    assert d.shape() == "3 budgets × 2 model levels × 2 precision levels × 5 trials"
    assert parse_cell("model=tiny/precision=fp32/b10000") == d.cells[0]
    assert cell_label("model=tiny/b10000") == "model tiny, budget 10000"


def test_named_levels_keep_the_order_they_were_written_in():
    d = _design(
        model={"tiny": {"preset": "llama-tiny"}, "base": {"preset": "llama-small"}, "mid": {"preset": "llama-tiny"}}
    )
    assert list(d.factors["model"]) == ["tiny", "base", "mid"]


def test_a_model_level_replaces_the_base_model_and_a_preset_level_drops_the_base_overrides():
    config = copy.deepcopy(DEFAULT)
    config["model"]["overrides"] = {"hidden_size": 16}
    config["design"] = {"model": {"small": {"preset": "llama-small"}, "wide": {"overrides": {"hidden_size": 64}}}}
    d = Design(validate_config(config, SCHEMA))
    small, wide = (d.model_config(c) for c in (d.cell("model=small/b10000"), d.cell("model=wide/b10000")))
    assert (small["preset"], small["overrides"]) == ("llama-small", {})
    assert (wide["preset"], wide["overrides"]) == ("llama-tiny", {"hidden_size": 64})


def _with_train(budgets, **train) -> Design:
    config = copy.deepcopy(DEFAULT)
    config["study"]["budgets"] = budgets
    config["train"].update(train)
    return Design(validate_config(config, SCHEMA))


def test_a_cells_fewest_steps_are_its_budget_in_full_chunks_and_batches_times_the_epochs():
    d = _with_train([10000], epochs=3, batch_size=4)
    assert d.min_steps(d.cells[0]) == 3 * math.ceil(math.ceil(10000 / 64) / 4)


def test_compile_auto_is_decided_once_for_the_whole_study_by_its_shortest_cell():
    mixed = _with_train([10000, 400000], device="cuda", epochs=3, batch_size=1)  # 471 and 18 750 steps at the least
    assert {mixed.train_config(c)["compile"] for c in mixed.cells} == {False}
    assert "budget 10000 trains at least 471 steps" in mixed.compile_note()
    config = copy.deepcopy(DEFAULT)
    config["train"].update(epochs=3, batch_size=1)
    config["study"]["budgets"], config["design"] = [10000, 400000], {"hardware": {"h200": {"device": "cuda:1"}}}
    assert (
        "hardware h200, budget 10000 trains at least 471 steps"
        in Design(validate_config(config, SCHEMA)).compile_note()
    )
    long = _with_train([100000, 400000], device="cuda", epochs=3, batch_size=1)
    assert {long.train_config(c)["compile"] for c in long.cells} == {"auto"} and long.compile_note() is None


def test_the_compile_note_speaks_only_where_a_cuda_study_gave_compiling_up():
    assert _with_train([10000, 400000]).compile_note() is None  # device auto: on a CPU auto never compiles
    assert _with_train([10000, 20000], device="cuda").compile_note() is None  # no cell would have compiled
    forced = _with_train([10000, 400000], device="cuda", compile=True)
    assert {forced.train_config(c)["compile"] for c in forced.cells} == {True} and forced.compile_note() is None


def test_precision_lr_batch_size_and_hardware_levels_set_the_training_settings_and_resources():
    d = _design(
        precision=["bf16-mixed"],
        lr=[0.0003],
        batch_size=[4],
        hardware={"a100": {"device": "cuda", "gpu_model": "a100", "partition": "gpu"}},
    )
    cell = d.cells[0]
    assert cell.id == "precision=bf16-mixed/lr=0.0003/batch_size=4/hardware=a100/b10000"
    train = d.train_config(cell)
    assert (train["precision"], train["lr"], train["batch_size"], train["device"]) == ("bf16-mixed", 0.0003, 4, "cuda")
    assert d.resources(cell) == {"gpu_model": "a100", "slurm_partition": "gpu"}


def test_a_devices_level_sets_the_trials_device_count_and_its_path_and_shares_the_device_profile():
    d = _design(devices=[1, 2], hardware={"a100": {"device": "cuda", "gpu_model": "a100"}})
    two = next(c for c in d.cells if dict(c.levels)["devices"] == "2")
    assert two.id == "hardware=a100/devices=2/b10000"
    assert (d.train_config(two)["devices"], d.devices(two)) == (2, 2)
    assert d.devices(d.cells[0]) == 1
    # one device profile per hardware level and precision: CS_TFLOPS is one device's, PE multiplies it by the count
    assert len({profile_key_of(dict(c.levels)) for c in d.cells}) == 1


def test_each_hardware_level_and_precision_has_its_own_device_profile():
    d = _design(precision=["fp32", "bf16-mixed"], hardware={"a": {"device": "cpu"}, "b": {"device": "cpu"}})
    assert d.profile_keys() == [
        "hardware=a/precision=bf16-mixed/",
        "hardware=a/precision=fp32/",
        "hardware=b/precision=bf16-mixed/",
        "hardware=b/precision=fp32/",
    ]
    assert d.profile_settings("hardware=b/precision=bf16-mixed/") == {"device": "cpu", "precision": "bf16-mixed"}
    assert profile_key_of({"model": "x", "lr": "0.001"}) == ""  # model and lr share the device's profile


def test_a_model_level_with_its_own_tokenizer_gets_its_own_data():
    d = _design(
        model={"plain": {"preset": "llama-tiny"}, "own": {"preset": "llama-tiny", "tokenizer": {"vocab_size": 512}}}
    )
    assert d.tokenizer_keys() == ["", "tok=own/"]
    assert d.tokenizer_config("tok=own/")["vocab_size"] == 512 and d.tokenizer_config("")["vocab_size"] == 1024


def test_a_model_levels_budget_scale_sets_its_trials_tokens_and_subsets_while_its_cells_keep_the_budgets():
    from tokenwatt.plan.layout import Layout

    d = _design(model={"small": {"preset": "llama-tiny", "budget_scale": 2.5}, "big": {"preset": "llama-small"}})
    small, big = d.cell("model=small/b10000"), d.cell("model=big/b10000")
    assert (small.budget, d.tokens(small), big.budget, d.tokens(big)) == (10000, 25000, 10000, 10000)
    assert "budget_scale" not in d.model_config(small)  # the design's key, not the model's: it never reaches the model
    assert d.min_steps(small) == math.ceil(math.ceil(25000 / 64) / d.train_config(small)["batch_size"])
    layout = Layout(d.config, d)
    assert layout.trial_inputs(small.id, 1)["subset"].endswith("subsets/b25000/t1.json")
    drawn = sorted(int(p.split("/b")[-1].split("/")[0]) for p in layout.data_targets() if p.endswith("/t1.json"))
    assert drawn == [10000, 20000, 25000, 40000, 50000, 100000]  # every count once, shared where equal
    assert d.shape().endswith("5 trials (budgets × budget_scale per model level: small ×2.5)")


def test_a_tokenizer_level_draws_subsets_only_at_the_token_counts_its_own_trials_train():
    from tokenwatt.plan.layout import Layout

    d = _design(
        model={
            "plain": {"preset": "llama-tiny"},
            "own": {"preset": "llama-tiny", "tokenizer": {"vocab_size": 512}, "budget_scale": 2},
        }
    )
    counts = {
        (p.split("subsets/")[1].split("b")[0], int(p.split("/b")[-1].split("/")[0]))
        for p in Layout(d.config, d).data_targets()
        if "subsets/" in p
    }
    assert counts == {
        ("", 10000),
        ("", 20000),
        ("", 40000),
        ("tok=own/", 20000),
        ("tok=own/", 40000),
        ("tok=own/", 80000),
    }


def test_a_budget_scale_that_is_not_a_positive_number_is_named_by_its_key():
    config = {**copy.deepcopy(DEFAULT), "design": {"model": {"a": {"preset": "llama-tiny", "budget_scale": 0}}}}
    with pytest.raises(ConfigError, match="design.model.a.budget_scale"):
        validate_config(config, SCHEMA)


@pytest.mark.parametrize(
    "level,message",
    [
        ({"preset": "nope"}, "design.model.bad.model.preset: 'nope' is not a preset"),
        ({"source": "pretrained"}, "design.model.bad.model.name: model.source is pretrained"),
        (
            {"preset": "llama-tiny", "overrides": {"rope_scaling": {}}},
            "design.model.bad.model.overrides: ['rope_scaling'] need",
        ),
        ({"source": "elsewhere"}, "design.model.bad.source: 'elsewhere' is not one of"),
    ],
)
def test_a_bad_model_level_is_named_by_its_key_before_any_job(level, message):
    config = {**copy.deepcopy(DEFAULT), "design": {"model": {"good": {"preset": "llama-tiny"}, "bad": level}}}
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        validate_config(config, SCHEMA)


def test_an_empty_or_repeated_level_list_is_rejected():
    for design in ({"precision": []}, {"lr": [0.001, 0.001]}):
        with pytest.raises(ConfigError, match="design"):
            validate_config({**copy.deepcopy(DEFAULT), "design": design}, SCHEMA)


def test_a_hardware_level_may_name_one_local_gpu_and_a_cpu_only_machine_says_it_has_none():
    from tokenwatt.measurement.devices import DeviceError, resolve_device

    d = _design(hardware={"first": {"device": "cuda:0"}, "second": {"device": "cuda:1"}})
    assert d.train_config(d.cell("hardware=second/b10000"))["device"] == "cuda:1"
    with pytest.raises(DeviceError, match="cuda:1 but no CUDA device is visible"):
        resolve_device("cuda:1")
    with pytest.raises(ConfigError, match="design.hardware.x.device"):
        validate_config({**copy.deepcopy(DEFAULT), "design": {"hardware": {"x": {"device": "gpu1"}}}}, SCHEMA)


def test_a_reference_precision_gives_every_precision_of_a_device_one_cs_tflops_profile():
    d = _design(precision=["fp32", "bf16-mixed"], hardware={"a": {"device": "cpu"}})
    d.config["metric"]["cs_basis"] = "fp32"
    cs = d.cs_profile_keys()
    assert (
        cs["precision=bf16-mixed/hardware=a/b10000"]
        == cs["precision=fp32/hardware=a/b10000"]
        == "hardware=a/precision=fp32/"
    )
    # bf16's own profile stays: its matmul checks are judged against its own precision
    assert d.profile_keys() == ["hardware=a/precision=bf16-mixed/", "hardware=a/precision=fp32/"]


def test_a_reference_precision_the_study_does_not_train_adds_its_profile():
    d = _design()
    d.config["train"]["precision"], d.config["metric"]["cs_basis"] = "bf16-mixed", "fp32"
    assert d.profile_keys() == ["", "precision=fp32/"]
    assert d.profile_settings("precision=fp32/")["precision"] == "fp32"
    assert d.profile_settings("")["precision"] == "bf16-mixed"
    assert set(d.cs_profile_keys().values()) == {"precision=fp32/"}


def test_a_stopping_level_sets_its_cells_train_stop_and_pairs_them_on_the_same_subsets():
    rule = {"rule": "marginal", "min_gain_per_kj": 5.0, "patience": 2}
    d = _design(stopping={"full": "none", "early": rule})
    early, full = d.cell("stopping=early/b10000"), d.cell("stopping=full/b10000")
    assert d.train_config(early)["stop"] == rule and d.train_config(full)["stop"] == "none"
    assert (
        d.tokenizer_key(early) == d.tokenizer_key(full) and early.budget == full.budget
    )  # same subset, paired by trial


def test_a_selection_level_has_its_own_training_data_over_the_studys_tokenizer_and_its_keys_over_the_defaults():
    d = _design(selection={"raw": "none", "strict": {"near_dup": {"threshold": 0.9}, "filters": {"min_words": 20}}})
    assert d.cells[0].id == "selection=raw/b10000"
    assert [d.selection_key(c) for c in d.cells[:4:3]] == ["sel=raw/", "sel=strict/"]
    assert d.selection_config("raw") == {"near_dup": None, "filters": None, "order": "shuffled"}
    strict = d.selection_config("strict")
    assert strict["near_dup"] == {**d.config["selection"]["near_dup"], "threshold": 0.9}
    assert strict["filters"] == {"min_words": 20}


def test_a_level_with_an_order_of_its_own_trains_its_subsets_in_that_order_and_the_others_shuffled():
    d = _design(selection={"raw": "none", "easy-first": {"order": {"curriculum": {"score": "words"}}}})
    assert d.ordered_levels() == ["easy-first"]
    assert d.train_config(d.cell("selection=easy-first/b10000"))["order"] == "given"
    assert "order" not in d.train_config(d.cell("selection=raw/b10000"))  # its trials' params as before
    assert d.ordered_level(d.cell("selection=easy-first/b10000")) == "easy-first"
    assert d.ordered_level(d.cell("selection=raw/b10000")) is None


def test_a_curriculum_written_without_its_direction_is_the_same_study_as_one_that_writes_the_default():
    implicit = _design(selection={"easy-first": {"order": {"curriculum": {"score": "words"}}}})
    explicit = _design(
        selection={"easy-first": {"order": {"curriculum": {"score": "words", "direction": "ascending"}}}}
    )
    assert implicit.selection_config("easy-first") == explicit.selection_config("easy-first")
    assert implicit.selection_config("easy-first")["order"]["curriculum"]["direction"] == "ascending"


def test_where_a_trial_saves_its_state_is_no_part_of_its_settings_so_changing_it_reruns_nothing():
    config = copy.deepcopy(DEFAULT)
    config["train"] |= {"checkpoint_every": 5000, "keep_checkpoint": True}
    before = Design(validate_config(copy.deepcopy(DEFAULT), load_schema(ROOT / "workflow/schemas/config.schema.yaml")))
    after = Design(validate_config(config, load_schema(ROOT / "workflow/schemas/config.schema.yaml")))
    assert [after.train_config(c) for c in after.cells] == [before.train_config(c) for c in before.cells]
    assert not {"checkpoint_every", "keep_checkpoint"} & set(after.train_config(after.cells[0]))


def _branched(every=4000, **design) -> Design:
    config = copy.deepcopy(DEFAULT)
    config["train"] = {**config["train"], "schedule": {"kind": "wsd", "cooldown_fraction": 0.2, "branch_every": every}}
    return Design(validate_config({**config, "design": design}, SCHEMA))


def test_a_branched_trial_continues_the_last_saved_point_before_its_cooldown():
    d = _branched(model={"small": {"preset": "llama-tiny", "budget_scale": 2.0}, "big": {"preset": "llama-small"}})
    points = {c.id: d.branch_point(c) for c in d.cells}  # floor(0.8 × tokens / (4000 × budget_scale))
    assert points == {
        "model=small/b10000": 2,
        "model=small/b20000": 4,
        "model=small/b40000": 8,
        "model=big/b10000": 2,
        "model=big/b20000": 4,
        "model=big/b40000": 8,
    }
    assert d.stable_points() == [("model=small/", p) for p in range(1, 9)] + [("model=big/", p) for p in range(1, 9)]
    assert d.train_config(d.cell("model=big/b10000"))["order"] == "drawn"


def test_a_stable_run_trains_at_the_peak_rate_and_none_of_the_cooldowns_keys_key_it():
    a, b = _branched(), _branched()
    b.config["train"]["schedule"]["cooldown_fraction"] = 0.3
    assert a.stable_train_config("") == b.stable_train_config("")
    assert a.stable_train_config("")["schedule"] == {"kind": "constant", "warmup_tokens_per_parameter": 0.0}


def test_a_branched_studys_tokens_count_each_stable_run_once():
    d = _branched()
    # own: 10000 - 2·4000, 20000 - 4·4000, 40000 - 8·4000; the longest also trains the stable run, 8·4000
    assert d.trained_tokens() == {"b10000": 2000, "b20000": 4000, "b40000": 8000 + 32000}
    assert sum(d.trained_tokens().values()) == 32000 + 2000 + 4000 + 8000


def test_a_branched_trials_inputs_are_its_subset_and_its_saved_point_and_a_stretchs_the_point_before():
    from tokenwatt.plan.layout import Layout

    d = _branched(every=9000)
    layout = Layout({**d.config, "results": "r"}, d)
    assert "origin" not in layout.trial_inputs("b10000", 1)  # 0.8 × 10000 < 9000: it trains from its first step
    assert layout.trial_inputs("b40000", 2)["origin"] == "r/stable/t2/p3.pt"
    assert layout.stable_inputs("", 2, 3)["origin"] == "r/stable/t2/p2.pt"
    assert "origin" not in layout.stable_inputs("", 2, 1)


def test_each_saved_point_has_its_stretch_record_beside_it_and_an_unbranched_study_has_none():
    from tokenwatt.plan.layout import Layout

    d = _branched(every=9000)
    layout = Layout({**d.config, "results": "r"}, d)
    assert layout.stretch("", 2, 3) == "r/stable/t2/p3.json"
    assert sorted(layout.stretch_records()) == sorted(f"r/stable/t{t}/p{p}.json" for t in d.trials for p in (1, 2, 3))
    plain = Design(validate_config(copy.deepcopy(DEFAULT), SCHEMA))
    assert Layout({**plain.config, "results": "r"}, plain).stretch_records() == []


def test_a_branched_study_compiles_every_stretch_and_cooldown_alike_where_auto_compiles():
    config = copy.deepcopy(DEFAULT)
    config["train"] = {**config["train"], "compile_min_steps": 10, "schedule": {"kind": "wsd", "branch_every": 4000}}
    d = Design(validate_config({**config, "design": {}}, SCHEMA))
    assert d.auto_compiles
    for train in (d.train_config(d.cells[0]), d.stable_train_config("")):  # not each stretch by its own steps
        assert (train["compile"], train["compile_min_steps"]) == ("auto", 0)


def test_a_model_levels_budget_scale_scales_its_stable_runs_points_as_its_budgets():
    d = _branched(model={"small": {"preset": "llama-tiny", "budget_scale": 2.0}, "big": {"preset": "llama-small"}})
    small, big = d.cell("model=small/b40000"), d.cell("model=big/b40000")
    assert (d.branch_tokens(small), d.branch_tokens(big)) == (8000, 4000)
    assert d.branch_point(small) == d.branch_point(big) == 8  # the same fractions of their budgets
    assert d.train_config(small)["schedule"]["branch_every"] == 8000 and d.stable_tokens("model=small/", 3) == 24000
