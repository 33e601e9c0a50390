"""Corpus sources: the seeded synthetic story generator, local files, an installed package's text, and the Hub.

Every source returns a polars DataFrame with columns ``doc_id`` (int, 0..n-1 in source
order) and ``text`` (str); ``source_record`` says where the documents came from (files by sha256, a package by
name, version and licence), which the study keeps beside them.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from ..common.installed import NotInstalled, installed_files

LOCAL_FORMATS = {".txt": "text", ".jsonl": "json", ".json": "json", ".parquet": "parquet", ".csv": "csv"}


class CorpusError(ValueError):
    """A corpus could not be loaded; the message says which key or file and what to do."""


def _frame(texts: list[str]) -> pl.DataFrame:
    return pl.DataFrame({"doc_id": np.arange(len(texts), dtype=np.int64), "text": texts})


# ---------------------------------------------------------------- synthetic
def _made_up(rng: np.random.Generator, syllables: list[str], lo: int, hi: int) -> str:
    return "".join(rng.choice(syllables, size=int(rng.integers(lo, hi + 1))))


def _story(rng: np.random.Generator, g: dict[str, Any]) -> str:
    pick = lambda key: str(rng.choice(g[key]))  # noqa: E731
    name, name2 = (_made_up(rng, g["name_syllables"], 2, 3).capitalize() for _ in range(2))
    adj, adj2 = rng.choice(g["adjectives"], size=2, replace=False)
    animal, animal2 = rng.choice(g["animals"], size=2, replace=False)
    obj, obj2 = rng.choice(g["objects"], size=2, replace=False)
    pronoun, pronoun_obj = (("she", "her"), ("he", "him"), ("they", "them"))[int(rng.integers(3))]
    slots = {
        "name": name,
        "name2": name2,
        "adj": adj,
        "adj2": adj2,
        "animal": animal,
        "animal2": animal2,
        "object": obj,
        "object2": obj2,
        "person": pick("people"),
        "place": pick("places"),
        "verb": pick("verbs_past"),
        "move": pick("moves_past"),
        "feeling": pick("feelings"),
        "time": pick("times"),
        "weather": pick("weather"),
        "word": _made_up(rng, g["word_syllables"], 2, 4),
        "pronoun": pronoun,
        "pronoun_obj": pronoun_obj,
    }
    span = g["story_length"]
    n_middle = int(rng.integers(span["min_middle"], span["max_middle"] + 1))
    templates = [pick("openings"), *rng.choice(g["middles"], size=n_middle, replace=False), pick("endings")]
    return " ".join(str(t).format(**slots) for t in templates)


# What a web crawl adds to text, for a corpus where selection can matter: a site's navigation and policy lines. A page
# takes BOILERPLATE_LINES of them, so pages vary as sites do and only some pairs are near-duplicates of each other.
BOILERPLATE = (
    "Home | About us | Contact | Shop",
    "We use cookies to improve your experience. By using this site you accept cookies.",
    "Privacy policy | Terms of use | Imprint",
    "Enable JavaScript to see the comments.",
    "Copyright {site}. All rights reserved.",
    "Sign in | Register | Forgot your password?",
    "Follow {site} on social media",
    "Subscribe to our newsletter",
    "Read more | Share | Print",
    "{site} uses cookies and similar technologies. Manage cookie settings.",
)
BOILERPLATE_LINES = 4
GARBLE_CHARACTERS = list("abcdefghijklmnopqrstuvwxyz0123456789#@$%&*+=<>~^|/{}[].")


def _near_duplicate(rng: np.random.Generator, story: str, grammar: dict[str, Any]) -> str:
    """A copy with small edits: one word in 40 (at least one) replaced by a made-up word."""
    words = story.split()
    for i in rng.choice(len(words), size=max(1, len(words) // 40), replace=False):
        words[i] = _made_up(rng, grammar["word_syllables"], 2, 4)
    return " ".join(words)


def _boilerplate(rng: np.random.Generator, grammar: dict[str, Any]) -> str:
    site = _made_up(rng, grammar["name_syllables"], 2, 3).capitalize()
    return "\n".join(line.format(site=site) for line in rng.choice(BOILERPLATE, size=BOILERPLATE_LINES, replace=False))


def _garbled(rng: np.random.Generator, words: int) -> str:
    return " ".join("".join(rng.choice(GARBLE_CHARACTERS, size=int(rng.integers(1, 12)))) for _ in range(words))


def synthetic_corpus(
    grammar: dict[str, Any],
    documents: int,
    seed: int,
    near_duplicates: float = 0.0,
    boilerplate: float = 0.0,
    garbled: float = 0.0,
) -> pl.DataFrame:
    """Seeded children's stories from ``grammar``; same seed, grammar and fractions → identical texts.

    The fractions turn that share of the ``documents`` into near-duplicates of a story (copies with small edits),
    boilerplate pages and garbled text, at seeded positions. They are drawn from a second generator after the stories,
    so the stories are those of the same seed without them (all zero: the corpus is exactly the plain one).
    """
    n_near, n_boiler, n_garbled = (round(documents * share) for share in (near_duplicates, boilerplate, garbled))
    stories_n = documents - n_near - n_boiler - n_garbled
    if stories_n < 1:
        raise CorpusError(
            "corpus.synthetic: near_duplicates + boilerplate + garbled leave no story; keep their sum below 1"
        )
    rng = np.random.default_rng(seed)
    stories = [_story(rng, grammar) for _ in range(stories_n)]
    if stories_n == documents:
        return _frame(stories)
    noise = np.random.default_rng(np.random.SeedSequence([seed, 1]))
    extra = [_near_duplicate(noise, stories[int(noise.integers(stories_n))], grammar) for _ in range(n_near)]
    extra += [_boilerplate(noise, grammar) for _ in range(n_boiler)]
    extra += [_garbled(noise, int(noise.integers(20, 80))) for _ in range(n_garbled)]
    order = noise.permutation(documents)
    texts = [*stories, *extra]
    return _frame([texts[i] for i in order])


def load_grammar(path: str | Path) -> dict[str, Any]:
    return json.loads(Path(path).read_text(encoding="utf-8"))


# ---------------------------------------------------------------- local files
def _check_decodable(path: Path, encoding_errors: str) -> None:
    if encoding_errors != "strict" or path.suffix == ".parquet":
        return
    try:
        path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as err:
        raise CorpusError(
            f"corpus file {path} is not valid UTF-8 (byte {err.start}: {err.reason}); re-encode it "
            "as UTF-8, or set corpus.local.encoding_errors: replace to substitute U+FFFD"
        ) from None


def local_corpus(files: list[str], text_column: str = "text", encoding_errors: str = "strict") -> pl.DataFrame:
    """Load txt/jsonl/parquet/csv files through ``datasets.load_dataset(data_files=...)``.

    A .txt file yields one document per line (the ``text`` builder's behaviour); blank
    lines are kept here and dropped by normalization, which counts them.
    """
    import datasets

    paths = [Path(f) for f in files]
    if not paths:
        raise CorpusError("corpus.local.files is empty; list at least one .txt/.jsonl/.parquet/.csv file")
    for p in paths:
        if not p.is_file():
            raise CorpusError(f"corpus.local.files: {p} does not exist")
        if not os.access(p, os.R_OK):  # reading it would end the job in a PermissionError traceback, not a sentence
            raise CorpusError(f"corpus.local.files: {p} cannot be read by this user (check its permissions)")
        if p.suffix not in LOCAL_FORMATS:
            raise CorpusError(f"corpus.local.files: {p} has suffix {p.suffix!r}; use one of {sorted(LOCAL_FORMATS)}")
        if p.stat().st_size == 0:
            raise CorpusError(f"corpus.local.files: {p} is empty; remove it from the list or fill it")
    builders = {LOCAL_FORMATS[p.suffix] for p in paths}
    if len(builders) > 1:
        raise CorpusError(f"corpus.local.files mixes formats {sorted(builders)}; use files of one format")
    for p in paths:
        _check_decodable(p, encoding_errors)
    builder = builders.pop()
    kwargs: dict[str, Any] = {}
    if builder in ("text", "csv"):
        kwargs["encoding_errors"] = encoding_errors
    if builder == "text":
        kwargs["keep_linebreaks"] = False
    column = "text" if builder == "text" else text_column
    # A fresh cache per load: the datasets cache is keyed by path and mtime, so a file whose
    # content changed with the same mtime would otherwise be read stale.
    with tempfile.TemporaryDirectory(prefix="tokenwatt-corpus-") as cache:
        try:
            ds = datasets.load_dataset(
                builder,
                data_files=[str(p) for p in paths],
                split="train",
                cache_dir=cache,
                keep_in_memory=True,
                **kwargs,
            )
        except Exception as err:  # the builders raise many types; the user needs the files and the reason
            raise CorpusError(
                f"corpus.local.files: could not read {', '.join(map(str, paths))} as {builder} "
                f"({type(err).__name__}: {err}); check that each file is valid {builder}"
            ) from err
        if column not in ds.column_names:
            raise CorpusError(
                f"corpus.local.text_column is {column!r} but {paths[0]} has columns {ds.column_names}; "
                "set corpus.local.text_column to the column that holds the text"
            )
        texts = ds[column]
    return _frame(["" if t is None else str(t) for t in texts])


# ---------------------------------------------------------------- an installed package
def _longest_string(source: str, path: Path) -> str:
    """The longest string literal of a Python module: where a data package keeps its text (pythonbible's
    translations hold each whole text in one literal beside short titles)."""
    try:
        tree = ast.parse(source, filename=str(path))
    except SyntaxError as err:
        raise CorpusError(f"corpus.package: {path} is not a Python module (line {err.lineno}: {err.msg})") from None
    strings = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    if not strings:
        raise CorpusError(f"corpus.package: {path} holds no string literal; set corpus.package.extract: text")
    return max(strings, key=len)


# A sentence ends at . ! or ? with any closing quotes or brackets after it, before white space.
SENTENCE_END = re.compile(r"[.!?][\"'”’)\]]*(?=\s)")


def split_long(line: str, words: int) -> list[str]:
    """``line`` cut into documents of at least ``words`` words each, every cut at the first sentence end after them
    (the last piece may be shorter); every character but the white space at a cut is kept: a text kept as one line
    (a whole translation) becomes passages."""
    pieces, start = [], 0
    for end in SENTENCE_END.finditer(line):
        if len(line[start : end.end()].split()) >= words:
            pieces.append(line[start : end.end()].strip())
            start = end.end()
    if line[start:].strip():
        pieces.append(line[start:].strip())
    return pieces


def package_corpus(
    distributions: list[str], files: list[str], extract: str = "text", document_words: int | None = None
) -> pl.DataFrame:
    """The text of installed distributions' files (in the order given, each one's files in sorted order), one
    document per line (blank lines kept here, dropped and counted by normalization): ``extract`` text reads each file
    as UTF-8 text, python_string the longest string literal of each Python module; with ``document_words`` a longer
    line is cut into passages of at least that many words at sentence ends (``split_long``)."""
    try:
        paths = [p for d in distributions for p in installed_files(d, files).paths]
    except NotInstalled as err:
        raise CorpusError(str(err)) from None
    texts: list[str] = []
    for path in paths:
        try:
            text = path.read_bytes().decode("utf-8")
        except UnicodeDecodeError as err:
            raise CorpusError(f"corpus.package: {path} is not valid UTF-8 (byte {err.start}: {err.reason})") from None
        lines = (_longest_string(text, path) if extract == "python_string" else text).splitlines()
        texts += [p for line in lines for p in split_long(line, document_words)] if document_words else lines
    return _frame(texts)


def _sha256(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def source_record(source: str, options: dict[str, Any], inputs: list[str], documents: int) -> dict[str, Any]:
    """Where a corpus came from, for the study's outputs: the source, its settings, every file it read with its
    sha256 (``inputs``: the synthetic grammar or the local files), and for a package its version and licence as
    installed and the text's licence as the config states it."""
    record: dict[str, Any] = {"source": source, "documents": documents, "settings": options}
    if source == "package":
        found = [installed_files(d, options["files"]) for d in options["distributions"]]
        record |= {
            "distributions": [
                {"name": f.distribution, "version": f.version, "package_licence": f.licence} for f in found
            ],
            "text_licence": options.get("text_licence"),
            "files": [
                {"path": r, "sha256": _sha256(p)} for f in found for r, p in zip(f.relative, f.paths, strict=True)
            ],
        }
    elif inputs:
        record["files"] = [{"path": str(f), "sha256": _sha256(f)} for f in inputs]
    return record


# ---------------------------------------------------------------- hub
def hf_corpus(
    name: str,
    split: str,
    text_column: str = "text",
    config: str | None = None,
    revision: str | None = None,
    max_documents: int | None = None,
) -> pl.DataFrame:
    """A Hub data set through ``datasets.load_dataset``; offline gives a message with the way out."""
    import datasets

    if max_documents:
        split = f"{split}[:{max_documents}]"
    try:
        ds = datasets.load_dataset(name, config, split=split, revision=revision)
    except (ConnectionError, OSError, datasets.exceptions.DatasetNotFoundError) as err:
        raise CorpusError(
            f"corpus.hf: could not load {name!r} (split {split!r}) from the Hugging Face Hub: {err}. "
            "If this machine is offline, download the data set elsewhere, copy its files here and "
            "use corpus.source: local with corpus.local.files pointing at them."
        ) from err
    if text_column not in ds.column_names:
        raise CorpusError(f"corpus.hf.text_column is {text_column!r}; {name} has columns {ds.column_names}")
    return _frame([str(t) for t in ds[text_column]])
