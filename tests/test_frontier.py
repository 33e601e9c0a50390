"""The energy-optimal frontier: three estimators of N*(J), D*(J), L*(J), their refusals, intervals and the CLI.

Ladders are at the project's scale: N from 1e5 to 1e7 parameters, joules per token growing with N (2e-9 J per
parameter per token, a CPU's order), energies in J, losses in nats; each size × trial id is one constant-rate run
evaluated at log-spaced points, so every point may stand for its budget."""

import json

import numpy as np
import polars as pl
import pytest
from tokenwatt.analysis.scaling.allocation import allocate
from tokenwatt.analysis.scaling.energy_per_token import PerToken
from tokenwatt.analysis.scaling.frontier import FrontierPoints, _run_ends, frontier, isoenergy, lower_hull
from tokenwatt.analysis.scaling.law import Law, ScalingInputError
from workflow_helpers import run_script

TRUTH = Law(E=1.8, A=120.0, B=40.0, alpha=0.34, beta=0.28)
COST = PerToken("power", 2e-9, 1.0)  # J per token: 2e-3 J at 1e6 parameters
SIZES = tuple(np.geomspace(1e5, 1e7, 7))


def ladder(rng=None, sizes=SIZES, trials=3, points=24, trial_sd=0.0, noise=0.0, law=TRUTH, cost=COST):
    """Every size × trial id a constant-rate run from 3e4 to 3e9 tokens, evaluated at ``points`` log-spaced token counts;
    a trial id's seed effect (lognormal, ``trial_sd``) is shared by all its sizes, each point has its own."""
    rows = []
    for t in range(trials):
        effect = rng.normal(0, trial_sd) if rng is not None else 0.0
        for n in sizes:
            D = np.geomspace(3e4, 3e9, points)
            eps = rng.normal(0, noise, points) if rng is not None else np.zeros(points)
            rows.append((np.full(points, n), D, cost(n) * D, law.loss(n, D) * np.exp(effect + eps), np.full(points, t)))
    return FrontierPoints.of(*(np.concatenate(c) for c in zip(*rows, strict=True)))


def truth_at(energies):
    return allocate(TRUTH, COST, energies)


MIDDLE = np.geomspace(1e2, 3e3, 4)  # energies whose true N* (5.5e5 to 2.9e6) lies well inside the sizes


def test_the_lower_hull_runs_from_the_cheapest_point_to_the_lowest_loss():
    x = np.array([0.0, 1.0, 2.0, 3.0, 4.0, 5.0])
    y = np.array([5.0, 3.0, 2.5, 1.0, 1.2, 0.9])  # (2, 2.5) lies above the chord from (1, 3) to (3, 1)
    assert lower_hull(x, y).tolist() == [0, 1, 3, 5]


def test_the_law_recovers_the_true_energy_optimum_on_noise_free_points():
    got = frontier(ladder(), MIDDLE)["approaches"]["law"]["estimates"]
    true = truth_at(MIDDLE)
    assert [e["n_opt"] for e in got] == pytest.approx(true.N, rel=1e-3)
    assert [e["d_opt"] for e in got] == pytest.approx(true.D, rel=1e-3)
    assert [e["loss_opt"] for e in got] == pytest.approx(true.loss, rel=1e-4)


def test_the_envelope_follows_the_true_optimum_and_its_exponent():
    result = frontier(ladder(), MIDDLE)["approaches"]["envelope"]
    true = truth_at(MIDDLE)
    assert [e["n_opt"] for e in result["estimates"]] == pytest.approx(true.N, rel=0.35)
    # Along e(N) = c·N the energy-optimal N* grows as J^(β/(α+β)), as the FLOP-optimal one does.
    assert result["details"]["n_exponent"] == pytest.approx(TRUTH.beta / (TRUTH.alpha + TRUTH.beta), abs=0.06)
    assert [e["loss_opt"] for e in result["estimates"]] == pytest.approx(true.loss, rel=0.01)


def test_isoenergy_finds_the_vertex_of_a_loss_parabolic_in_log_n():
    sizes = np.geomspace(1e5, 1e7, 5)
    energies = np.array([1e3, 1e4, 1e5])
    best = {1e3: 4e5, 1e4: 1.2e6, 1e5: 3e6}  # the optimum at each energy, none on a measured size
    rows = [
        (n, J / COST(n), J, 2.0 + 0.05 * np.log(n / best[J]) ** 2 - 0.1 * np.log10(J), t)
        for t in range(2)
        for n in sizes
        for J in energies
    ]
    got = isoenergy(FrontierPoints.of(*map(np.array, zip(*rows, strict=True))), energies)
    assert got.n == pytest.approx([best[J] for J in energies], rel=1e-9)
    assert got.loss == pytest.approx([2.0 - 0.1 * np.log10(J) for J in energies], rel=1e-12)
    assert all(w is None for w in got.why)


def test_isoenergy_refuses_an_optimum_at_the_largest_size_rather_than_reporting_it():
    small = ladder(sizes=SIZES[:3])  # 1e5 to 4.6e5: the true optimum lies above them at these energies
    est = frontier(small, np.geomspace(3e2, 1e3, 2))["approaches"]["isoenergy"]["estimates"]
    assert all(e["n_opt"] is None for e in est)
    assert all("largest size" in e["why"] and "beyond the sizes measured" in e["why"] for e in est)


def test_a_run_that_levels_off_still_reaches_the_energies_after_its_best_point():
    # The smallest size stops improving halfway (its later points are a little worse, as eval noise makes them): it
    # still reached those energies, with its best loss so far.
    points = ladder(sizes=SIZES[:4], trials=1)
    small = points.N == SIZES[0]
    late = small & (points.J > np.median(points.J[small]))
    loss = np.where(late, points.loss[small].min() + 0.01, points.loss)
    flat = FrontierPoints.of(points.N, points.D, points.J, loss, points.trial)
    energy = np.array([np.quantile(points.J[small], 0.9)])
    assert SIZES[0] in isoenergy(flat, energy).details["sizes_per_energy"][0]


def test_the_laws_joules_per_token_are_each_runs_at_its_end():
    points = ladder(sizes=SIZES[:3], trials=2)
    ends = _run_ends(points)
    assert len(ends) == 3 * 2
    assert all(
        points.D[i] == points.D[(points.N == points.N[i]) & (points.trial == points.trial[i])].max() for i in ends
    )


def test_the_laws_column_carries_the_doubt_the_caller_found_and_what_the_fit_does_not_identify():
    result = frontier(ladder(), MIDDLE, law_doubt="its lack-of-fit screen rejects it")
    assert result["approaches"]["law"]["doubt"] == "its lack-of-fit screen rejects it"
    assert result["approaches"]["envelope"]["doubt"] is None and result["approaches"]["isoenergy"]["doubt"] is None


def test_an_empty_table_is_refused_by_name():
    with pytest.raises(ScalingInputError, match="no points"):
        FrontierPoints.of([], [], [], [])


def test_isoenergy_refuses_a_lowest_loss_shared_by_neighbouring_sizes():
    sizes, energy = np.geomspace(1e5, 1e7, 4), 1e3
    losses = [3.0, 2.5, 2.5, 2.9]  # a flat bottom: no one size is the optimum
    rows = [(n, energy / COST(n), energy, v, 0) for n, v in zip(sizes, losses, strict=True)]
    got = isoenergy(FrontierPoints.of(*map(np.array, zip(*rows, strict=True))), np.array([energy]))
    assert np.isnan(got.n[0]) and "shared by neighbouring sizes" in got.why[0]


def test_isoenergy_needs_three_sizes_at_an_energy():
    two = ladder(sizes=SIZES[2:4])
    est = frontier(two, [COST(SIZES[3]) * 1e6])["approaches"]["isoenergy"]["estimates"][0]
    assert est["n_opt"] is None and "2 model size(s) reach this energy" in est["why"]


def test_a_size_enters_a_slice_only_where_every_one_of_its_trial_ids_reaches_the_energy():
    points = ladder(sizes=SIZES[:4], trials=2)
    short = (points.N == SIZES[1]) & (points.trial == 1) & (points.J > COST(SIZES[1]) * 3e8)
    kept = points.keep(~short)
    high = COST(SIZES[1]) * 1e9
    slices = isoenergy(kept, np.array([high])).details["sizes_per_energy"][0]
    assert SIZES[1] not in slices and SIZES[2] in slices


def test_the_law_refuses_an_optimum_where_the_points_show_no_data_effect():
    flat = ladder(law=Law(E=1.8, A=120.0, B=40.0, alpha=0.34, beta=0.0))
    est = frontier(flat, MIDDLE)["approaches"]["law"]["estimates"]
    assert all(e["n_opt"] is None and ("not identified" in e["why"] or "no finite optimum" in e["why"]) for e in est)


def test_every_approach_counts_trial_ids_and_sizes_and_the_laws_intervals_hold_the_true_optimum():
    result = frontier(ladder(np.random.default_rng(3), trial_sd=0.01, noise=0.005), MIDDLE)
    assert {a["intervals"] for a in result["approaches"].values()} == {"jackknife over 3 trial ids and 7 model sizes"}
    law = result["approaches"]["law"]["estimates"]
    for e, true in zip(law, truth_at(MIDDLE).N, strict=True):
        assert e["n_low"] < true < e["n_high"]
        assert e["n_high"] / e["n_low"] < 1.5  # an interval, not the whole range of sizes


def misspecified(shifts=(0.9, 1.0, 1.1), bend=2.0, points=24):
    """A noise-free ladder the law's form does not describe: each trial id moves every size's effective N by its
    own factor (``shifts``, shared by all its sizes, so leaving it out moves every approach's N* together), and a
    term in (log N)² that the law lacks bends the loss across the sizes."""
    rows = []
    for t, shift in enumerate(shifts):
        for n in SIZES:
            D = np.geomspace(3e4, 3e9, points)
            loss = TRUTH.loss(n * shift, D) + bend * np.log(n * shift / 1e6) ** 2 / np.log(D)
            rows.append((np.full(points, n), D, COST(n) * D, loss, np.full(points, t)))
    return FrontierPoints.of(*(np.concatenate(c) for c in zip(*rows, strict=True)))


def _overlap(result, j):
    """The rule agreement used to be: the approaches' N* intervals at energy j share a value."""
    bands = [(a["estimates"][j]["n_low"], a["estimates"][j]["n_high"]) for a in result["approaches"].values()]
    return all(lo is not None for lo, _ in bands) and max(lo for lo, _ in bands) <= min(hi for _, hi in bands)


def test_two_approaches_whose_n_star_differ_contradict_though_their_intervals_overlap():
    result = frontier(misspecified(), [MIDDLE[1]])
    assert _overlap(result, 0)  # what the old rule printed as "agree"
    pair = next(t for t in result["agreement"][0]["pairs"] if t["approaches"] == ["isoenergy", "law"])
    # the slices' N* about 1.4 × the law's, and the paired interval of the difference of log N* excludes 0
    assert pair["log_difference"] == pytest.approx(0.33, abs=0.05) and pair["log_low"] > 0
    assert pair["contradict"] is True and pair["verdict"] == "contradict"
    assert result["agreement"][0]["contradict"] is True


def test_a_pair_whose_paired_interval_holds_zero_is_no_contradiction_detected_with_the_intervals_width():
    result = frontier(ladder(np.random.default_rng(4), trial_sd=0.01, noise=0.005), MIDDLE)
    held = [t for row in result["agreement"] for t in row["pairs"] if t["contradict"] is False]
    assert held
    for t in held:
        assert t["log_low"] <= 0 <= t["log_high"]
        assert t["width_factor"] == pytest.approx(np.exp(t["log_high"] - t["log_low"]))
        assert t["verdict"] == f"no contradiction detected (intervals ×{t['width_factor']:.3g} wide)"


def test_a_law_in_doubt_is_left_out_of_the_paired_test_and_said_to_be():
    row = frontier(misspecified(), [MIDDLE[1]], law_doubt="its lack-of-fit screen rejects it")["agreement"][0]
    assert [t["approaches"] for t in row["pairs"]] == [["envelope", "isoenergy"]]
    assert row["left_out"] == {
        "law": "the law is in doubt (its lack-of-fit screen rejects it): left out of the comparison"
    }


def test_an_energy_outside_the_measured_range_is_refused_not_extrapolated():
    points = ladder()
    with pytest.raises(ScalingInputError, match="outside the points' measured energies"):
        frontier(points, [points.J.max() * 2])


def test_an_optimum_beyond_the_measured_sizes_is_marked():
    small = ladder(sizes=SIZES[:3])
    est = frontier(small, [3e3])["approaches"]["law"]["estimates"][0]
    assert est["n_opt"] > SIZES[2] and est["beyond_sizes"] is True


def write_table(path, points):
    lines = ["params,tokens,joules,loss,seed"] + [
        f"{n:.10g},{d:.10g},{j:.10g},{v:.10g},s{t}"
        for n, d, j, v, t in zip(points.N, points.D, points.J, points.loss, points.trial, strict=True)
    ]
    path.write_text("\n".join(lines) + "\n")


def test_fit_frontier_writes_each_approach_per_energy_as_specified(tmp_path):
    write_table(tmp_path / "points.csv", ladder(np.random.default_rng(5), trial_sd=0.01, noise=0.005))
    out = tmp_path / "frontier.json"
    args = ["--params", "params", "--tokens", "tokens", "--energy", "joules", "--loss", "loss", "--group", "seed"]
    proc = run_script("fit_frontier.py", tmp_path / "points.csv", *args, "--json", out)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(out.read_text())
    assert set(result["approaches"]) == {"envelope", "isoenergy", "law"}
    for approach in result["approaches"].values():
        assert len(approach["estimates"]) == 7
        for e in approach["estimates"]:
            assert {"energy_j", "n_opt", "n_low", "n_high", "d_opt", "loss_opt", "why"} <= set(e)
            assert (e["n_opt"] is None) == (e["why"] is not None)
    assert "paired test of log N*, envelope − isoenergy" in proc.stdout
    versus = result["energy_vs_flop"]["estimates"]
    assert len(versus) == 7 and all((e["ratio"] is None) == (e["why"] is not None) for e in versus)
    assert "energy- / FLOP-optimal N* (slices)" in proc.stdout


def test_fit_frontier_names_a_missing_column_and_exits_2(tmp_path):
    write_table(tmp_path / "points.csv", ladder())
    proc = run_script(
        "fit_frontier.py", tmp_path / "points.csv", "--params", "params", "--tokens", "tokens", "--energy", "J"
    )
    assert proc.returncode == 2
    proc = run_script(
        "fit_frontier.py",
        *(tmp_path / "points.csv", "--params", "params", "--tokens", "tokens", "--energy", "J", "--loss", "loss"),
    )
    assert proc.returncode == 2 and "no column 'J' (--energy)" in proc.stderr


def test_where_joules_go_as_flops_the_energy_and_flop_optimal_sizes_are_one_size():
    rows = frontier(ladder(), MIDDLE)["energy_vs_flop"]["estimates"]  # e(N) ∝ N: a joule is a fixed number of FLOPs
    assert [r["ratio"] for r in rows] == pytest.approx([1.0] * len(MIDDLE), rel=1e-9)
    assert [r["compute_flop"] for r in rows] == pytest.approx(6 * MIDDLE / COST(1.0), rel=1e-9)


def test_where_small_models_waste_joules_per_flop_the_energy_optimal_size_is_larger_as_the_law_says():
    cost = PerToken("power", 2e-8, 0.5)  # e(N) ∝ N^0.5: a FLOP of a small model costs more joules
    energies = np.geomspace(2.2, 5.0, 3)  # true N*_E 3.1e6 to 5e6, inside the sizes every slice reaches
    got = frontier(ladder(cost=cost), energies)["energy_vs_flop"]
    energy_opt = allocate(TRUTH, cost, energies)
    compute = 6 * energy_opt.N * energy_opt.D
    a, b = TRUTH.alpha, TRUTH.beta
    flop_opt = (a * TRUTH.A / (b * TRUTH.B)) ** (1 / (a + b)) * (compute / 6) ** (b / (a + b))
    assert [r["ratio"] for r in got["estimates"]] == pytest.approx(energy_opt.N / flop_opt, rel=0.1)  # 3.06
    first = got["estimates"][0]
    assert first["excludes_one"] and first["ratio_low"] < energy_opt.N[0] / flop_opt[0] < first["ratio_high"]
    assert got["intervals"] == "jackknife over 3 trial ids and 7 model sizes"


def test_the_energy_against_flop_ratio_is_refused_where_either_slice_refuses():
    rows = frontier(ladder(sizes=SIZES[:3]), MIDDLE[:2])["energy_vs_flop"]["estimates"]
    assert all(r["ratio"] is None and r["why"].startswith("no iso-energy optimum") for r in rows)


def test_how_flops_are_counted_moves_the_flop_optimal_size_and_is_named_beside_the_ratio():
    cost = PerToken("power", 2e-8, 0.5)
    energies = np.geomspace(2.2, 5.0, 3)
    points = ladder(cost=cost)
    # the same points with each size's FLOPs per token growing as N^2, not 6N: another count, another N*_C
    skewed = FrontierPoints.of(points.N, points.D, points.J, points.loss, points.trial, flops=points.N**2 * points.D)
    counted, assumed = (
        frontier(skewed, energies, flops="N²D")["energy_vs_flop"],
        frontier(points, energies)["energy_vs_flop"],
    )
    assert (counted["flops"], assumed["flops"]) == ("N²D", "6ND")
    ratios = [(c["ratio"], a["ratio"]) for c, a in zip(counted["estimates"], assumed["estimates"], strict=True)]
    assert all(c is not None and a is not None and c > 1.3 * a for c, a in ratios)


def test_fit_frontier_counts_compute_from_a_flops_per_token_column(tmp_path):
    table = tmp_path / "points.csv"
    write_table(table, ladder())
    pl.read_csv(table).with_columns(fpt=pl.col("params") * 6.0).write_csv(table)  # 6N: the default, given as a column
    out, default = tmp_path / "with.json", tmp_path / "without.json"
    args = ["--params", "params", "--tokens", "tokens", "--energy", "joules", "--loss", "loss", "--group", "seed"]
    for json_out, extra in ((out, ["--flops-per-token", "fpt"]), (default, [])):
        proc = run_script("fit_frontier.py", table, *args, *extra, "--energies", *map(str, MIDDLE), "--json", json_out)
        assert proc.returncode == 0, proc.stderr
    given, assumed = (json.loads(f.read_text())["energy_vs_flop"] for f in (out, default))
    assert given["flops"] == "the column fpt × tokens" and assumed["flops"] == "6ND"
    assert [e["ratio"] for e in given["estimates"]] == pytest.approx([e["ratio"] for e in assumed["estimates"]])
    assert all(e["ratio"] == pytest.approx(1.0) for e in given["estimates"])  # e(N) ∝ N in this ladder


def test_fit_frontier_reads_a_parquet_table_as_it_reads_the_csv(tmp_path):
    from tokenwatt.common.files import write_parquet

    write_table(tmp_path / "points.csv", ladder())
    write_parquet(tmp_path / "points.parquet", pl.read_csv(tmp_path / "points.csv"))  # as the workflow writes tables
    args = ["--params", "params", "--tokens", "tokens", "--energy", "joules", "--loss", "loss", "--group", "seed"]
    outs = {}
    for name in ("points.csv", "points.parquet"):
        proc = run_script("fit_frontier.py", tmp_path / name, *args, "--energies", *map(str, MIDDLE))
        assert proc.returncode == 0, proc.stderr
        outs[name] = proc.stdout.split("\n", 1)[1]  # the first line names the file
    assert outs["points.csv"] == outs["points.parquet"]


def test_a_table_no_estimator_can_use_ends_in_one_line_and_exit_code_2(tmp_path):
    write_table(tmp_path / "points.csv", ladder(sizes=SIZES[3:4]))  # one model size
    args = ["--params", "params", "--tokens", "tokens", "--energy", "joules", "--loss", "loss", "--group", "seed"]
    proc = run_script("fit_frontier.py", tmp_path / "points.csv", *args)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("fit_frontier: error: no estimator can use")
    assert "1 model size(s) in column 'params'" in proc.stderr


def test_fit_frontier_runs_on_the_example_table_the_docs_ship():
    args = ["--params", "params", "--tokens", "tokens", "--energy", "joules", "--loss", "loss", "--group", "seed"]
    proc = run_script("fit_frontier.py", "docs/examples/frontier-points.csv", *args, "--energies", "1277")
    assert proc.returncode == 0, proc.stderr
    envelope = next(line for line in proc.stdout.splitlines() if line.strip().startswith("envelope"))
    assert "N* 1.69" in envelope  # the law it was made from puts N* at 1.73e6 (docs/scaling-laws.md)
    assert "fit_frontier.py results/analysis/scaling_points.csv" in run_script("fit_frontier.py", "--help").stdout
