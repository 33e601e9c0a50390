"""Every file between rules is read through a checked reader: a missing, truncated or damaged file is named with
its path, what it should be and the fix, and reads as a sentence (no traceback)."""

import json

import polars as pl
import pytest
from tokenwatt.common.failures import explain
from tokenwatt.common.files import (
    DamagedFileError,
    read_chunks,
    read_curve,
    read_power_trace,
    read_profile,
    read_steps,
    read_subset,
    read_table,
    write_parquet,
)

POWER = pl.DataFrame({"t_s": [0.0, 0.1], "power_w": [30.0, 31.0]})
STEPS = pl.DataFrame({"step": [1], "epoch": [1], "tokens": [64], "loss": [4.2], "elapsed_s": [0.1]})
PROFILE = {"cs_tflops": 0.2, "median_tflops": 0.2, "windows": 5}
SUBSET = {"budget": 1000, "trial": 1, "chunk_ids": [3, 1, 2], "n_chunks": 3, "real_tokens": 1002}


def _truncated(path):
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    return path


@pytest.mark.parametrize(
    "reader,table,what,fix",
    [
        (read_power_trace, POWER, "power trace", "its trial is restored from the store, or trained again"),
        (read_steps, STEPS, "loss curve (training steps)", "its trial is restored from the store, or trained again"),
        (read_curve, pl.DataFrame({"point": [1], "eval_loss": [4.0]}), "eval curve", "its trial is restored"),
        (
            read_chunks,
            pl.DataFrame({"chunk_id": [1], "input_ids": [[1, 2]], "attention_mask": [[1, 1]], "n_real": [2]}),
            "chunk table",
            "the data stage rebuilds it",
        ),
    ],
)
def test_a_truncated_table_is_named_with_its_path_and_the_fix(tmp_path, reader, table, what, fix):
    path = tmp_path / "b2000/t2/file.parquet"
    write_parquet(path, table)
    assert reader(path).height == table.height
    with pytest.raises(DamagedFileError) as err:
        reader(_truncated(path))
    message = str(err.value)
    assert (
        message.startswith(f"{path} is not a readable {what} (Parquet: ") and "delete it and rerun snakemake" in message
    )
    assert fix in message and "\n" not in message
    assert explain(err.value) == message  # a tokenwatt error: one sentence on the terminal, no traceback


def test_a_table_without_its_columns_or_missing_is_named(tmp_path):
    path = tmp_path / "power.parquet"
    write_parquet(path, pl.DataFrame({"t_s": [0.0]}))
    with pytest.raises(
        DamagedFileError, match=r"power.parquet is not a power trace: it has no column power_w; delete it"
    ):
        read_power_trace(path)
    with pytest.raises(
        DamagedFileError, match=r"nowhere.parquet is missing \(the loss curve \(training steps\)\); delete it"
    ):
        read_steps(tmp_path / "nowhere.parquet")
    with pytest.raises(
        DamagedFileError, match=r"trials.parquet is not a readable trials table .*the analysis rebuilds it"
    ):
        read_table(_write(tmp_path / "trials.parquet", b"PAR1 not really"), "trials table")


def _write(path, data: bytes):
    path.write_bytes(data)
    return path


def test_a_truncated_or_incomplete_device_profile_is_named_with_the_fix(tmp_path):
    path = tmp_path / "device/profile.json"
    path.parent.mkdir()
    path.write_text(json.dumps(PROFILE))
    assert read_profile(path)["cs_tflops"] == 0.2
    path.write_text(json.dumps(PROFILE)[:20])
    with pytest.raises(DamagedFileError) as err:
        read_profile(path)
    assert str(err.value).startswith(f"{path} is not readable JSON (")
    assert "the default target restores it from the store, or measures it again" in str(err.value)
    path.write_text(json.dumps({"windows": 5}))
    with pytest.raises(
        DamagedFileError, match=r"profile.json is not a device profile: it lacks cs_tflops, median_tflops"
    ):
        read_profile(path)


def test_a_damaged_subset_is_named_and_never_a_bare_json_error(tmp_path):
    path = tmp_path / "subsets/b1000/t1.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(SUBSET))
    assert read_subset(path)["chunk_ids"] == [3, 1, 2]
    for text, found in [
        (json.dumps(SUBSET)[:-9], "is not readable JSON"),
        ("[1, 2]", "holds a JSON list, not an object"),
        (json.dumps({**SUBSET, "chunk_ids": "3,1,2"}), "chunk_ids is not a list of chunk ids"),
    ]:
        path.write_text(text)
        with pytest.raises(DamagedFileError, match=found) as err:
            read_subset(path)
        assert str(err.value).startswith(str(path)) and "the subset is drawn again" in str(err.value)
