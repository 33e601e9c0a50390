import os
import subprocess
import sys

import numpy as np
import polars as pl
import pytest
from tokenwatt.data.chunking import ChunkError, chunk_documents, chunk_ids, with_special_tokens
from tokenwatt.data.split import SplitError, split_documents
from tokenwatt.data.subsets import SubsetError, draw_subset, trial_seed
from tokenwatt.data.tokenizer import TokenizerError, load_tokenizer, save_tokenizer, tokenizer_info
from transformers import AutoTokenizer
from workflow_helpers import ROOT


def test_chunks_are_cut_at_length_and_the_last_is_padded():
    out = chunk_ids([7], [list(range(10, 20))], length=4, pad_id=0)
    assert out["input_ids"].to_list() == [[10, 11, 12, 13], [14, 15, 16, 17], [18, 19, 0, 0]]
    assert out["attention_mask"].to_list()[-1] == [1, 1, 0, 0]
    assert out["n_real"].to_list() == [4, 4, 2]
    assert out["doc_id"].to_list() == [7, 7, 7]


def test_a_document_of_exactly_one_chunk_gets_no_padding_chunk():
    assert chunk_ids([0], [[1, 2, 3, 4]], length=4, pad_id=0)["n_real"].to_list() == [4]


def test_chunks_never_span_documents():
    out = chunk_ids([0, 1], [[1, 2, 3], [4, 5]], length=4, pad_id=0)
    assert out["doc_id"].to_list() == [0, 1] and out["n_real"].to_list() == [3, 2]


def test_chunk_length_below_two_is_refused():
    with pytest.raises(ChunkError, match="chunk.length is 1"):
        chunk_ids([0], [[1, 2]], length=1, pad_id=0)


def test_bos_and_eos_frame_each_document():
    assert with_special_tokens([5, 6], 1, 2) == [1, 5, 6, 2]
    assert with_special_tokens([5, 6], None, 2) == [5, 6, 2]


def test_n_real_counts_tokens_even_when_pad_id_occurs_in_text(small_tokenizer):
    docs = pl.DataFrame({"doc_id": [0], "text": ["The cat sat on the mat. " * 5]})
    out = chunk_documents(docs, small_tokenizer, length=16, add_bos=True, add_eos=True)
    n_tokens = len(small_tokenizer(docs["text"][0], add_special_tokens=False)["input_ids"]) + 2
    assert out["n_real"].sum() == n_tokens
    assert out["input_ids"].to_list()[0][0] == small_tokenizer.bos_token_id


def test_tokenizer_round_trips_through_auto_tokenizer(tmp_path, small_tokenizer):
    save_tokenizer(small_tokenizer, tmp_path)
    loaded = AutoTokenizer.from_pretrained(tmp_path)
    text = "Once upon a time, Bolika the fox found a shiny zibblo."
    assert loaded(text)["input_ids"] == small_tokenizer(text)["input_ids"]
    assert loaded.decode(loaded(text)["input_ids"]) == text
    info = tokenizer_info(loaded, "train")
    assert info["vocab_size"] == 400 and info["pad_token_id"] == 0


def test_a_trained_tokenizer_loads_as_auto_tokenizer_would_without_its_model_mapping(tmp_path, small_tokenizer):
    save_tokenizer(small_tokenizer, tmp_path)
    text = "Once upon a time, Bolika the fox found a shiny zibblo."
    auto = AutoTokenizer.from_pretrained(tmp_path)
    code = (
        f"import sys; from tokenwatt.data.tokenizer import load_tokenizer; t = load_tokenizer({str(tmp_path)!r}); "
        f"print(type(t).__name__, t({text!r})['input_ids'], t.pad_token_id); "
        "print('transformers.models.auto.tokenization_auto' in sys.modules)"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT / "workflow" / "scripts")}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    ).stdout.split("\n")
    assert out[:2] == [f"{type(auto).__name__} {auto(text)['input_ids']} {auto.pad_token_id}", "False"]


def test_eval_split_is_by_document_and_disjoint():
    docs = pl.DataFrame({"doc_id": np.arange(100), "text": [f"doc {i}" for i in range(100)]})
    train, evaluation = split_documents(docs, eval_documents=10, seed=1)
    assert evaluation.height == 10 and train.height == 90
    assert not set(train["doc_id"]) & set(evaluation["doc_id"])
    assert split_documents(docs, 10, seed=1)[1].equals(evaluation)


def test_eval_split_larger_than_corpus_names_the_key():
    docs = pl.DataFrame({"doc_id": [0, 1], "text": ["a", "b"]})
    with pytest.raises(SplitError, match="split.eval_documents is 5"):
        split_documents(docs, 5, seed=0)


def _chunk_table(docs: int = 300, seed: int = 0) -> pl.DataFrame:
    """A level's chunk table as chunking writes it: documents of 1–3 chunks, the last of each partly padded."""
    rng = np.random.default_rng(seed)
    per_doc = rng.integers(1, 4, size=docs)
    doc_ids = np.repeat(np.arange(docs), per_doc)
    last = np.r_[doc_ids[1:] != doc_ids[:-1], True]
    n_real = np.where(last, rng.integers(1, 65, size=doc_ids.size), 64)
    return pl.DataFrame({"chunk_id": np.arange(doc_ids.size), "doc_id": doc_ids, "n_real": n_real})


@pytest.fixture
def chunks():
    return _chunk_table()


def test_subsets_are_nested_across_budgets(chunks):
    seed = trial_seed(5, 1)
    small, large = draw_subset(chunks, 2000, seed), draw_subset(chunks, 8000, seed)
    assert large["chunk_ids"][: small["n_chunks"]] == small["chunk_ids"]


def test_subset_reaches_the_budget_with_the_fewest_chunks_and_records_the_exact_count(chunks):
    sub = draw_subset(chunks, 3000, seed=9)
    counts = chunks["n_real"].to_numpy()[sub["chunk_ids"]]
    assert sub["real_tokens"] == counts.sum() >= 3000
    assert counts[:-1].sum() < 3000


def test_trials_draw_different_subsets_and_a_seed_repeats(chunks):
    a, b = (draw_subset(chunks, 3000, trial_seed(5, t)) for t in (1, 2))
    assert a["chunk_ids"] != b["chunk_ids"]
    assert draw_subset(chunks, 3000, trial_seed(5, 1)) == a


def _keys(table: pl.DataFrame, ids: list[int]) -> list[tuple[int, int]]:
    """(document, place in it) of each chunk id, in the given order."""
    keyed = table.with_columns(part=pl.int_range(pl.len()).over("doc_id"))
    at = dict(zip(keyed["chunk_id"].to_list(), zip(keyed["doc_id"].to_list(), keyed["part"].to_list())))
    return [at[i] for i in ids]


def test_every_level_takes_its_subset_from_one_order_of_the_raw_chunks(chunks):
    """A level that removed every fourth document, its chunks numbered afresh as its own chunk file numbers them:
    its subset for trial 1 is the raw level's order of all chunks with the removed documents' taken out, so the two
    share every chunk of their common documents that both reach (common random numbers)."""
    level = chunks.filter(pl.col("doc_id") % 4 != 0).with_columns(chunk_id=pl.int_range(pl.len()))
    seed = trial_seed(5, 1)
    everything = _keys(chunks, draw_subset(chunks, int(chunks["n_real"].sum()), seed)["chunk_ids"])
    for budget in (2000, 6000):
        mine = _keys(level, draw_subset(level, budget, seed)["chunk_ids"])
        kept_in_raw_order = [k for k in everything if k[0] % 4 != 0]
        assert mine == kept_in_raw_order[: len(mine)]
        raw = _keys(chunks, draw_subset(chunks, budget, seed)["chunk_ids"])
        assert {k for k in raw if k[0] % 4 != 0} <= set(mine)


def test_budget_beyond_the_corpus_says_how_much_is_missing(chunks):
    with pytest.raises(
        SubsetError,
        match=rf"budget 99999 needs 99999 tokens, the corpus has {chunks['n_real'].sum()}; lower the budget or add data",
    ):
        draw_subset(chunks, 99999, seed=0)


def test_a_tokenizer_name_that_cannot_be_loaded_names_the_real_key():
    with pytest.raises(TokenizerError, match=r"^tokenizer.name 'no such tokenizer!' could not be loaded"):
        load_tokenizer("no such tokenizer!")


def test_a_corpus_emptied_by_normalization_says_so_instead_of_blaming_the_eval_split():
    empty = pl.DataFrame({"doc_id": [], "text": []}, schema={"doc_id": pl.Int64, "text": pl.String})
    with pytest.raises(SplitError, match="no documents are left after normalization and de-duplication"):
        split_documents(empty, 10, seed=1)


def test_a_budget_a_selection_level_cannot_fill_names_the_level(chunks):
    with pytest.raises(SubsetError, match=r"99999 tokens, design.selection level 'dedup' \(40 documents\) has"):
        draw_subset(chunks, 99999, seed=0, source="design.selection level 'dedup' (40 documents)")
