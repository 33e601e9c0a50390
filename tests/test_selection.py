"""The selection stage's library: near-duplicates found at the threshold, each quality rule on crafted documents,
evaluation documents kept out of training, and the record of what each step removed."""

import polars as pl
import pytest
from tokenwatt.analysis.selection.cost import SHARED, energy_to_target_with_selection, level_costs
from tokenwatt.data.corpus import synthetic_corpus
from tokenwatt.selection.filters import RULES, failed_rule
from tokenwatt.selection.near_dup import NearDupSettingsError, jaccard, near_duplicates, shingles
from tokenwatt.selection.order import MEASURES, order_documents
from tokenwatt.selection.steps import (
    SelectionError,
    apply_filters,
    record,
    refuse_empty,
    refuse_empty_eval,
    remove_eval_copies,
    remove_near_duplicates,
)

NEAR_DUP = {"shingle_size": 5, "permutations": 128, "threshold": 0.7}


def _docs(texts: list[str], first_id: int = 0) -> pl.DataFrame:
    return pl.DataFrame({"doc_id": list(range(first_id, first_id + len(texts))), "text": texts})


def _edited(text: str, every: int) -> str:
    """A copy with one word in ``every`` replaced."""
    return " ".join("zzz" if i % every == every - 1 else w for i, w in enumerate(text.split()))


@pytest.fixture(scope="module")
def stories(grammar) -> list[str]:
    return synthetic_corpus(grammar, 400, seed=7)["text"].to_list()


def test_a_copy_with_one_edit_in_forty_words_is_found_at_threshold_and_unrelated_stories_are_not(stories):
    copy = _edited(stories[3], 40)
    assert jaccard(shingles(copy, 5), shingles(stories[3], 5)) >= NEAR_DUP["threshold"]
    matches = near_duplicates([*stories, copy], 5, 128, NEAR_DUP["threshold"], seed=1)
    assert [(m.index, m.of) for m in matches] == [(400, "train:3")]


def test_a_copy_below_the_threshold_is_kept(stories):
    copy = _edited(stories[3], 4)
    assert jaccard(shingles(copy, 5), shingles(stories[3], 5)) < NEAR_DUP["threshold"]
    assert near_duplicates([stories[3], copy], 5, 128, NEAR_DUP["threshold"], seed=1) == []


DECONTAMINATE = {"shingle_size": 5, "containment": 0.8}


def test_a_near_copy_of_an_evaluation_document_never_reaches_training(stories):
    train, evaluation = _docs([*stories[:300], _edited(stories[350], 40)]), _docs(stories[350:], first_id=1000)
    kept, step = remove_eval_copies(train, evaluation, DECONTAMINATE)
    assert 300 not in kept["doc_id"].to_list() and step["step"] == "decontaminate"
    assert (
        step["examples"][0]["why"].startswith("eval_copy (holds 0.")
        and "of eval doc 1000's 5-word" in (step["examples"][0]["why"])
    )


def test_an_eval_story_copied_inside_a_longer_training_document_leaves_training(stories):
    """Jaccard sees two different documents (the host is three stories long) and kept it at any usual threshold;
    the host holds every shingle of the eval story."""
    host = f"{stories[0]} {stories[355]} {stories[1]}"
    assert jaccard(shingles(host, 5), shingles(stories[355], 5)) < 0.6
    train, evaluation = _docs([*stories[:100], host]), _docs(stories[350:360], first_id=1000)
    kept, step = remove_eval_copies(train, evaluation, DECONTAMINATE)
    assert set(range(101)) - set(kept["doc_id"].to_list()) == {100}
    assert "of eval doc 1005's" in step["examples"][0]["why"] and step["removed_by"] == {"eval_copy": 1}


def test_containment_is_exact_every_copy_at_the_threshold_goes_and_every_one_below_stays(stories):
    evaluation = _docs(stories[350:], first_id=1000)
    copies = [_edited(stories[350 + i % 50], every) for i, every in enumerate([18, 22, 25, 28, 33, 40] * 8)]

    def held(copy, i):
        own, ref = shingles(copy, 5), shingles(stories[350 + i % 50], 5)
        return len(own & ref) / len(ref)

    reached = [held(c, i) >= 0.8 for i, c in enumerate(copies)]
    assert 0 < sum(reached) < len(copies)
    kept, _ = remove_eval_copies(_docs([*stories[:100], *copies]), evaluation, DECONTAMINATE)
    removed = set(range(100, 100 + len(copies))) - set(kept["doc_id"].to_list())
    assert removed == {100 + i for i, r in enumerate(reached) if r}


def test_decontamination_leaves_near_duplicates_among_training_documents_to_the_levels(stories):
    train, evaluation = _docs([*stories[:300], _edited(stories[5], 40)]), _docs(stories[350:], first_id=1000)
    kept, _ = remove_eval_copies(train, evaluation, DECONTAMINATE)
    assert kept.height == 301


def test_settings_lsh_cannot_band_are_refused_by_their_keys(stories):
    with pytest.raises(NearDupSettingsError, match="permutations 16 with threshold 0.99 cannot be split"):
        near_duplicates(stories[:10], 5, 16, 0.99, seed=1)


def test_the_same_documents_and_settings_select_the_same_documents(grammar):
    docs = synthetic_corpus(grammar, 600, seed=7, near_duplicates=0.2)
    first, second = (remove_near_duplicates(docs, NEAR_DUP, seed=1)[0] for _ in range(2))
    assert first.equals(second)
    assert first.height < 600


CRAFTED = {
    "min_words": ("Too short to be a document.", 10),
    "max_words": (" ".join(["word"] * 50), 20),
    "min_mean_word_length": ("a b c d e f g h i j k l m n o p", 3),
    "max_mean_word_length": ("supercalifragilistic antidisestablishment", 10),
    "max_symbol_word_ratio": ("#tag #tag #more and then some words ...", 0.1),
    "min_alpha_words_ratio": ("12 34 56 78 cat", 0.8),
    "min_stop_words": ("Cats sleep. Dogs run fast.", 2),
    "max_duplicate_line_fraction": ("Buy now!\nBuy now!\nBuy now!\nA line.", 0.3),
    "max_top_bigram_fraction": ("go on go on go on go on and stop", 0.2),
    "max_policy_line_fraction": ("Accept cookies to continue.\nA story line.", 0.3),
    "min_punctuated_line_fraction": ("Home\nShop\nContact us", 0.12),
}


@pytest.mark.parametrize("rule", sorted(RULES))
def test_each_quality_rule_removes_its_crafted_document_and_keeps_a_story(rule, stories):
    text, threshold = CRAFTED[rule]
    assert failed_rule(text, {rule: threshold})[0] == rule
    kept_story = stories[0] if rule != "max_words" else " ".join(stories[0].split()[:15]) + "."
    assert failed_rule(kept_story, {rule: threshold}) is None


def test_a_filtered_document_is_recorded_with_its_rule_value_and_threshold():
    kept, step = apply_filters(_docs(["Cats sleep. Dogs run fast.", "The cat and the dog sat."]), {"min_stop_words": 2})
    assert kept["doc_id"].to_list() == [1]
    assert step["removed_by"] == {"min_stop_words": 1}
    assert step["examples"][0]["why"] == "min_stop_words (value 0, threshold 2)"


def test_a_selection_that_empties_the_corpus_is_refused_by_its_level_name():
    docs = _docs(["Cats sleep.", "Dogs run."])
    steps = [record("near_dup", None, docs, {}), apply_filters(docs, {"min_words": 5})[1]]
    with pytest.raises(SelectionError, match="level 'strict' leaves no training document .*filter kept 0 of 2"):
        refuse_empty("strict", steps)


def test_eval_filters_that_keep_no_eval_document_are_refused_naming_their_key():
    _, step = apply_filters(_docs(["Cats sleep.", "Dogs run."]), {"min_words": 5}, "eval_filter")
    assert step["step"] == "eval_filter"
    with pytest.raises(
        SelectionError, match=r"selection.eval_filters keeps none of the 2 eval documents .*min_words 2"
    ):
        refuse_empty_eval(step)


def test_a_levels_meters_and_its_trainings_are_both_named_so_a_sum_of_two_scopes_is_visible():
    records = {SHARED: [_step("decontaminate", 2.0)], "dedup": [_step("near_dup", 8.0)]}
    trials = _trials({"dedup": 2}).with_columns(meter=pl.lit("nvml"))
    (cost,) = level_costs(records, trials)
    assert cost["selection_meters"] == ["estimate"] and cost["training_meters"] == ["nvml"]


def _step(name: str, joules: float | None, kept: int = 10) -> dict:
    energy = {"energy_j": joules, "duration_s": 1.0, "meter": "estimate", "meter_is_estimate": True}
    return {"step": name, "kept": kept, "energy": energy}


def _trials(levels: dict[str, int]) -> pl.DataFrame:
    return pl.DataFrame({"levels_selection": [level for level, n in levels.items() for _ in range(n)]})


def test_a_levels_selection_cost_is_its_steps_and_the_eval_clearance_in_full_however_many_trials_trained_on_it():
    """Its budgets are alternatives and its trial ids replicates: dividing by them would make the cost shrink with
    replication."""
    records = {
        SHARED: [_step("decontaminate", 60.0)],
        "raw": [_step("near_dup", 0.0)],
        "dedup": [_step("near_dup", 20.0), _step("filter", 12.0)],
    }
    few = {c["level"]: c for c in level_costs(records, _trials({"raw": 3, "dedup": 3}))}
    many = {c["level"]: c for c in level_costs(records, _trials({"raw": 12, "dedup": 12}))}
    assert few["raw"]["selection_j"] == many["raw"]["selection_j"] == pytest.approx(60.0)
    assert few["dedup"]["selection_j"] == many["dedup"]["selection_j"] == pytest.approx(32.0 + 60.0)
    assert few["dedup"]["joules"] == pytest.approx(32.0) and "share_per_trial_j" not in few["dedup"]


def test_a_selection_step_without_a_meter_leaves_the_cost_missing_not_zero():
    records = {SHARED: [_step("decontaminate", 60.0)], "dedup": [_step("near_dup", None)]}
    assert level_costs(records, _trials({"dedup": 3}))[0]["selection_j"] is None


def test_energy_to_target_is_one_runs_median_beside_the_levels_whole_selection_cost_and_its_share_of_that_run():
    reached = [{"target": "perplexity 9", "series": "selection=dedup", "budget": 1000, "n_reached": 3, "n": 3}]
    rows = energy_to_target_with_selection(
        [{**reached[0], "energy_median_j": 348.0}], [{"level": "dedup", "selection_j": 32.0}]
    )
    assert (rows[0]["training_j"], rows[0]["selection_j"], rows[0]["with_selection_j"]) == (348.0, 32.0, 380.0)
    assert rows[0]["selection_pct_of_run"] == pytest.approx(100 * 32 / 348)


def test_the_config_schema_offers_exactly_the_quality_rules_the_library_has(root):
    from tokenwatt.plan.config import load_schema

    levels = load_schema(root / "workflow/schemas/config.schema.yaml")["properties"]["design"]["properties"][
        "selection"
    ]
    spec = next(s for s in levels["additionalProperties"]["oneOf"] if s.get("type") == "object")
    assert list(spec["properties"]["filters"]["properties"]) == list(RULES)


def test_the_report_section_names_each_levels_removals_and_its_energy_to_target_with_the_selection():
    from tokenwatt.presentation.sections.selection import selection_html

    step = {**_step("filter", 12.0, kept=8), "settings": {"min_words": 20}, "documents_in": 10, "removed": 2}
    step |= {
        "removed_by": {"min_words": 2},
        "examples": [{"doc_id": 4, "why": "min_words (value 3, threshold 20)", "text": "Too short."}],
    }
    shared = {**_step("decontaminate", 6.0), "settings": None, "documents_in": 10, "removed_by": {}, "examples": []}
    reached = {"target": "perplexity 9", "series": "selection=strict", "budget": 1000, "n_reached": 2, "n": 2}
    costs = level_costs({SHARED: [shared], "strict": [step]}, _trials({"strict": 2}))
    reach = energy_to_target_with_selection([{**reached, "energy_median_j": 100.0}], costs)
    page = selection_html({"shared": [shared], "levels": costs, "energy_to_target": reach})
    assert "min_words 2" in page and "min_words (value 3, threshold 20)" in page
    assert "118.0 J" in page and "18.0 %" in page  # 100 J of training + 12 J of its filter + 6 J of eval clearance
    assert "per trial" not in page


def _section(trials: pl.DataFrame, reached: dict, shared_steps: list[dict] | None = None) -> str:
    from tokenwatt.presentation.sections.selection import selection_html

    step = {**_step("filter", 12.0, kept=8), "settings": {"min_words": 20}, "documents_in": 10, "removed": 2}
    step |= {"removed_by": {"min_words": 2}, "examples": []}
    shared = shared_steps or [
        {**_step("decontaminate", 6.0), "settings": None, "documents_in": 10, "removed_by": {}, "examples": []}
    ]
    costs = level_costs({SHARED: shared, "strict": [step]}, trials)
    reach = energy_to_target_with_selection([{**reached, "energy_median_j": 100.0}], costs)
    return selection_html({"shared": shared, "levels": costs, "energy_to_target": reach})


REACHED = {"target": "perplexity 9", "series": "selection=strict", "budget": 1000, "n_reached": 2, "n": 2}


def test_the_section_warns_when_the_selections_meter_is_not_the_trainings():
    page = _section(_trials({"strict": 2}).with_columns(meter=pl.lit("nvml")), REACHED)
    assert "Two scopes in one sum" in page and "measured by estimate and its training by nvml" in page
    assert "Two scopes" not in _section(_trials({"strict": 2}).with_columns(meter=pl.lit("estimate")), REACHED)


def test_a_target_reached_at_the_first_eval_point_is_counted_as_an_upper_bound_beside_the_selection():
    page = _section(_trials({"strict": 2}), {**REACHED, "n_at_first_point": 1})
    assert "2 of 2 (1 an upper bound)" in page


def test_the_section_says_how_many_eval_documents_every_level_is_scored_on():
    kept = {**_step("eval_filter", 1.0, kept=7), "settings": {"min_words": 20}, "documents_in": 10}
    kept |= {"removed_by": {"min_words": 3}, "examples": []}
    assert "scored on the 7 of 10 eval documents that pass selection.eval_filters" in _section(
        _trials({"strict": 2}), REACHED, [kept]
    )


def test_an_interim_report_before_any_trial_shares_no_joules_and_does_not_fail():
    assert level_costs({SHARED: []}, pl.DataFrame()) == []


def test_the_eval_filters_joules_are_no_levels_selection_cost():
    eval_filter = {**_step("eval_filter", 50.0, kept=7), "documents_in": 10}
    records = {SHARED: [_step("decontaminate", 2.0), eval_filter], "dedup": [_step("near_dup", 8.0)]}
    (cost,) = level_costs(records, _trials({"dedup": 2}))
    assert cost["shared_joules"] == 2.0 and cost["selection_j"] == 8.0 + 2.0


def test_as_read_ranks_the_documents_in_the_order_they_are_read():
    ranks, step = order_documents(_docs(["b b b", "a", "c c"]), "as_read")
    assert ranks["doc_id"].to_list() == [0, 1, 2] and ranks["rank"].to_list() == [0, 1, 2]
    assert step["step"] == "order" and step["kept"] == 3 and step["removed"] == 0


def test_a_curriculum_ranks_by_its_measure_in_its_direction_ties_as_read():
    docs = _docs(["one two three", "one", "one two", "uno"])
    up, _ = order_documents(docs, {"curriculum": {"score": "words", "direction": "ascending"}})
    assert up.sort("rank")["doc_id"].to_list() == [1, 3, 2, 0]
    down, step = order_documents(docs, {"curriculum": {"score": "words", "direction": "descending"}})
    assert down.sort("rank")["doc_id"].to_list() == [0, 2, 1, 3]
    assert step["ranked_by"] == {"score": "words", "direction": "descending", "first": 3.0, "median": 1.5, "last": 1.0}


def test_a_curriculum_is_offered_by_exactly_the_measures_the_schema_names(root):
    import yaml

    schema = yaml.safe_load((root / "workflow/schemas/config.schema.yaml").read_text())
    level = schema["properties"]["design"]["properties"]["selection"]["additionalProperties"]["oneOf"][1]
    curriculum = level["properties"]["order"]["oneOf"][1]["properties"]["curriculum"]
    assert curriculum["properties"]["score"]["enum"] == list(MEASURES)


def test_every_measure_a_curriculum_offers_varies_across_normalized_documents(grammar):
    """A measure that gives every document one value would rank the corpus as read: the line measures do, once
    normalization leaves one line per document, so they are not offered."""
    from tokenwatt.data.normalize import normalize_text
    from tokenwatt.selection.filters import duplicate_line_fraction, policy_line_fraction

    corpus = synthetic_corpus(grammar, 300, seed=0, near_duplicates=0.2, boilerplate=0.05, garbled=0.05)
    texts = [normalize_text(t) for t in corpus["text"].to_list()]
    assert [name for name, measure in MEASURES.items() if len({measure(t) for t in texts}) < 2] == []
    assert {duplicate_line_fraction(t) for t in texts} == {0.0}
    assert len({policy_line_fraction(t) for t in texts}) <= 2  # a document is one line: it names a policy or not


def test_each_record_is_put_with_the_level_it_names_and_one_written_before_records_named_it_with_its_folder():
    from tokenwatt.analysis.selection.cost import selection_product

    records = {
        "results/data/decontaminate.json": {**_step("decontaminate", 6.0), "level": None},
        "results/data/sel=dedup/near_dup.json": {**_step("near_dup", 8.0), "level": "dedup"},
        "results/data/sel=dedup/filter.json": _step("filter", 4.0),  # an older record: no "level" key
    }
    data = selection_product(_trials({"dedup": 2}), {}, records, None).data
    (cost,) = data["levels"]
    assert [s["step"] for s in data["shared"]] == ["decontaminate"]
    assert (cost["level"], cost["joules"], cost["selection_j"]) == ("dedup", pytest.approx(12.0), pytest.approx(18.0))
