import hashlib
import json

import polars as pl
import pytest
from tokenwatt.data.corpus import (
    CorpusError,
    hf_corpus,
    local_corpus,
    package_corpus,
    source_record,
    split_long,
    synthetic_corpus,
)

TEXTS = ["Once there was a cat.", "The dog ran home."]


def test_synthetic_corpus_is_byte_identical_for_a_seed(grammar):
    a, b = synthetic_corpus(grammar, 50, seed=3), synthetic_corpus(grammar, 50, seed=3)
    assert a.equals(b)
    assert not a.equals(synthetic_corpus(grammar, 50, seed=4))


def test_synthetic_corpus_has_real_variety(grammar):
    docs = synthetic_corpus(grammar, 500, seed=0)["text"].to_list()
    sentences = [s for d in docs for s in d.split(". ")]
    assert len(set(docs)) == len(docs)
    assert len(set(sentences)) > 0.8 * len(sentences)
    assert len({w for d in docs for w in d.split()}) > 1500  # open vocabulary from made-up names


def _write(tmp_path, suffix):
    path = tmp_path / f"docs{suffix}"
    df = pl.DataFrame({"story": TEXTS})
    if suffix == ".txt":
        path.write_text("\n".join(TEXTS) + "\n")
    elif suffix == ".jsonl":
        path.write_text("".join(json.dumps({"story": t}) + "\n" for t in TEXTS))
    elif suffix == ".parquet":
        df.write_parquet(path)
    else:
        df.write_csv(path)
    return path


@pytest.mark.parametrize("suffix", [".txt", ".jsonl", ".parquet", ".csv"])
def test_local_files_of_each_type_load(tmp_path, suffix):
    docs = local_corpus([str(_write(tmp_path, suffix))], text_column="story")
    assert docs["text"].to_list() == TEXTS
    assert docs["doc_id"].to_list() == [0, 1]


def test_local_text_column_mismatch_names_the_key(tmp_path):
    with pytest.raises(CorpusError, match="corpus.local.text_column is 'text'.*'story'"):
        local_corpus([str(_write(tmp_path, ".jsonl"))], text_column="text")


def test_undecodable_local_file_names_the_file(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"good line\nbad \xff\xfe line\n")
    with pytest.raises(CorpusError, match=r"bad\.txt is not valid UTF-8.*encoding_errors: replace"):
        local_corpus([str(bad)])


def test_undecodable_bytes_are_replaced_when_configured(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"good line\nbad \xff line\n")
    assert local_corpus([str(bad)], encoding_errors="replace")["text"].to_list()[1] == "bad \ufffd line"


def test_missing_local_file_names_it(tmp_path):
    with pytest.raises(CorpusError, match="nothere.txt does not exist"):
        local_corpus([str(tmp_path / "nothere.txt")])


def test_an_unreadable_local_file_is_named_with_what_to_check(tmp_path, monkeypatch):
    import os

    path = _write(tmp_path, ".jsonl")
    monkeypatch.setattr(os, "access", lambda p, mode: False)  # as for a file without read permission (root reads all)
    with pytest.raises(CorpusError, match=rf"corpus.local.files: {path} cannot be read by this user"):
        local_corpus([str(path)])


def test_unreachable_hub_explains_the_local_way_out():
    with pytest.raises(CorpusError, match="corpus.source: local"):
        hf_corpus("tokenwatt-no-such-org/no-such-dataset", split="train")


def test_an_empty_local_file_is_named_with_what_to_do(tmp_path):
    (tmp_path / "empty.jsonl").write_text("")
    with pytest.raises(
        CorpusError, match=r"corpus.local.files: .*empty.jsonl is empty; remove it from the list or fill it"
    ):
        local_corpus([str(tmp_path / "empty.jsonl")])


def test_a_malformed_local_file_is_named_not_a_traceback(tmp_path):
    (tmp_path / "bad.jsonl").write_text("{not json\n")
    with pytest.raises(CorpusError, match=r"corpus.local.files: could not read .*bad.jsonl as json"):
        local_corpus([str(tmp_path / "bad.jsonl")])


def test_a_local_file_changed_in_place_is_read_by_content_not_from_a_stale_cache(tmp_path):
    import os

    path = tmp_path / "docs.txt"
    path.write_text("first version\n")
    stamp = path.stat().st_mtime_ns
    assert local_corpus([str(path)])["text"].to_list() == ["first version"]
    path.write_text("other version\n")
    os.utime(path, ns=(stamp, stamp))  # same size and mtime: only the content differs
    assert local_corpus([str(path)])["text"].to_list() == ["other version"]


def test_the_embedded_default_corpus_is_unchanged_by_the_noise_knobs(grammar):
    # the digest of config/config.yaml's corpus (8 000 stories, seed 7) before the knobs existed
    texts = synthetic_corpus(grammar, 8000, seed=7)["text"].to_list()
    digest = hashlib.sha256("\x00".join(texts).encode()).hexdigest()
    assert digest == "e4dcd456b3b78f1e34ea81a618e2c76aae03d5754600f4ba02320425e274218b"


def test_noise_knobs_add_their_share_of_near_duplicates_boilerplate_and_garbled_documents(grammar):
    plain = set(synthetic_corpus(grammar, 1000, seed=7)["text"])
    noisy = synthetic_corpus(grammar, 1000, seed=7, near_duplicates=0.2, boilerplate=0.05, garbled=0.05)
    stories = [t for t in noisy["text"] if t in plain]
    boiler = [t for t in noisy["text"] if "\n" in t]  # a page's lines; stories and garbled text are one line
    assert (noisy.height, len(stories), len(boiler)) == (1000, 700, 50)
    assert noisy["doc_id"].to_list() == list(range(1000))


def test_noise_knobs_that_leave_no_story_are_refused_by_name(grammar):
    with pytest.raises(CorpusError, match="near_duplicates \\+ boilerplate \\+ garbled leave no story"):
        synthetic_corpus(grammar, 100, seed=7, near_duplicates=0.6, garbled=0.4)


def test_a_package_corpus_reads_the_longest_string_of_a_module_one_document_per_line(installed_bible):
    docs = package_corpus(["tinybible"], ["tinybible/plain_text.py"], "python_string")
    assert docs["text"].to_list() == [
        "In the beginning the earth was without form.",
        "And there was light.",
        "",  # blank lines stay here; normalization drops and counts them
        "And it was good.",
    ]
    assert docs["doc_id"].to_list() == [0, 1, 2, 3]


def test_a_package_corpus_reads_text_files_by_pattern_in_sorted_order(installed_bible):
    docs = package_corpus(["tinybible"], ["*.txt"], "text")
    assert docs["text"].to_list() == ["A note on the text.", "A second note."]


def test_a_package_that_is_not_installed_is_named_with_its_key_and_how_to_install_it():
    with pytest.raises(
        CorpusError, match=r"corpus.package.distributions: 'no-such-bible' is not installed.*pip install"
    ):
        package_corpus(["no-such-bible"], ["*.txt"])


def test_a_pattern_matching_no_file_of_the_package_lists_the_files_it_has(installed_bible):
    with pytest.raises(
        CorpusError, match=r"corpus.package.files: no file of tinybible 0.0.2 matches \*.json.*notes.txt"
    ):
        package_corpus(["tinybible"], ["*.json"])


def test_a_package_corpus_records_its_version_both_licences_and_each_files_sha256(installed_bible):
    options = {"distributions": ["tinybible"], "files": ["tinybible/*.py"], "extract": "python_string"}
    record = source_record("package", {**options, "text_licence": "public domain"}, [], 4)
    module = installed_bible / "tinybible" / "plain_text.py"
    assert record["distributions"] == [{"name": "tinybible", "version": "0.0.2", "package_licence": "MIT"}]
    assert record["text_licence"] == "public domain" and record["documents"] == 4
    assert {"path": "tinybible/plain_text.py", "sha256": hashlib.sha256(module.read_bytes()).hexdigest()} in record[
        "files"
    ]


def test_a_local_corpus_records_each_file_it_read_by_sha256(tmp_path):
    path = _write(tmp_path, ".txt")
    record = source_record("local", {"files": [str(path)]}, [str(path)], 2)
    assert record["files"] == [{"path": str(path), "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}]


def test_a_cut_keeps_the_closing_quotes_and_brackets_of_its_sentence():
    assert split_long("(And so it was.) Then he said “light.” And there was light.", 3) == [
        "(And so it was.)",
        "Then he said “light.”",
        "And there was light.",
    ]


def test_a_text_kept_as_one_line_is_cut_into_passages_at_sentence_ends():
    line = 'In the beginning. The earth was void! "Let there be light," he said. And there was light.'
    assert split_long(line, 4) == [
        "In the beginning. The earth was void!",
        '"Let there be light," he said.',
        "And there was light.",
    ]
