import polars as pl
from tokenwatt.data.normalize import normalize_corpus, normalize_text


def test_nfkc_folds_compatibility_forms():
    assert normalize_text("ﬁne ｆｕｌｌ² ①") == "fine full2 1"


def test_composed_and_decomposed_forms_become_equal():
    assert normalize_text("cafe\u0301") == normalize_text("caf\u00e9") == "café"


def test_control_and_zero_width_characters_are_removed():
    assert normalize_text("a\u200bb\u200dc\ufeffd\x07e\u00adf") == "abcdef"


def test_line_breaks_and_tabs_become_single_spaces():
    assert normalize_text("  one\n\ntwo\tthree\r\n ") == "one two three"


def test_empty_documents_and_duplicates_are_dropped_and_counted():
    docs = pl.DataFrame({"doc_id": [0, 1, 2, 3], "text": ["A  story.", "\u200b \n", "A story.", "Other."]})
    out, summary = normalize_corpus(docs, dedupe=True)
    assert out["doc_id"].to_list() == [0, 3]
    assert summary["dropped"] == {"empty_after_normalization": 1, "exact_duplicate": 1}
    assert (summary["documents_in"], summary["documents_out"]) == (4, 2)


def test_duplicates_are_kept_when_dedupe_is_off():
    docs = pl.DataFrame({"doc_id": [0, 1], "text": ["Same.", "Same."]})
    assert normalize_corpus(docs, dedupe=False)[0].height == 2
