"""Heuristic quality filters of the Gopher (Rae et al. 2021), C4 (Raffel et al. 2020) and FineWeb (Penedo et al. 2024)
kind, each a named rule with one threshold: a document is removed by the first rule it fails, and the record says
which rule, the document's value and the threshold.

The line rules (duplicate lines, policy lines, punctuated lines) count lines as the text has them; after
``normalize``, which collapses every run of whitespace to one space, a document is one line, so in the workflow they
judge the document as a whole (does it repeat, name a policy, end in punctuation). A line keeps its meaning only for
text that reaches a rule with its line breaks.

A rule's name says its direction: ``min_*`` keeps a document whose value is at least the threshold, ``max_*`` one
whose value is at most it. The values are measured here, in plain Python, rather than through datatrove's filters:
datatrove runs them as stages of its own pipeline over its Document type, with dependencies (its tokenizer for
word splitting) the data environment would have to carry for a dozen one-line measures.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable

# Gopher's stop words: a document of natural English uses at least two of them.
STOP_WORDS = frozenset(("the", "be", "to", "of", "and", "that", "have", "with"))
# C4's line rule: a line naming site policies or scripts is boilerplate, not text.
POLICY_PHRASES = ("lorem ipsum", "javascript", "cookie", "terms of use", "privacy policy", "{")
TERMINAL_PUNCTUATION = (".", "!", "?", '"', "'")
_SYMBOLS = re.compile(r"#|\.\.\.|…")
_ALPHA = re.compile(r"[^\W\d_]")


def _words(text: str) -> list[str]:
    return text.split()


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()] or [text.strip()]


def words(text: str) -> float:
    return float(len(_words(text)))


def mean_word_length(text: str) -> float:
    found = _words(text)
    return sum(map(len, found)) / len(found) if found else 0.0


def symbol_word_ratio(text: str) -> float:
    """Hash signs and ellipses per word (Gopher)."""
    return len(_SYMBOLS.findall(text)) / max(1, len(_words(text)))


def alpha_words_ratio(text: str) -> float:
    """The fraction of words with at least one letter (Gopher)."""
    found = _words(text)
    return sum(1 for w in found if _ALPHA.search(w)) / len(found) if found else 0.0


def stop_words(text: str) -> float:
    """How many distinct Gopher stop words the document uses."""
    return float(len(STOP_WORDS & {w.strip(".,;:!?\"'").lower() for w in _words(text)}))


def duplicate_line_fraction(text: str) -> float:
    """The fraction of lines that repeat an earlier line (Gopher's repetition rule)."""
    lines = _lines(text)
    return 1 - len(set(lines)) / len(lines)


def top_bigram_fraction(text: str) -> float:
    """The characters the most frequent word bigram covers, over all word characters (Gopher)."""
    found = [w.lower() for w in _words(text)]
    if len(found) < 2:
        return 0.0
    (bigram, count), *_ = Counter(zip(found, found[1:], strict=False)).most_common(1)
    return count * (len(bigram[0]) + len(bigram[1])) / sum(map(len, found))


def policy_line_fraction(text: str) -> float:
    """The fraction of lines that contain a C4 policy phrase (cookies, terms of use, javascript, …)."""
    lines = _lines(text)
    return sum(1 for line in lines if any(p in line.lower() for p in POLICY_PHRASES)) / len(lines)


def punctuated_line_fraction(text: str) -> float:
    """The fraction of lines ending in terminal punctuation (FineWeb's line-punctuation rule)."""
    lines = _lines(text)
    return sum(1 for line in lines if line.endswith(TERMINAL_PUNCTUATION)) / len(lines)


# Rule name -> the measure it thresholds; the name's prefix gives the direction.
RULES: dict[str, Callable[[str], float]] = {
    "min_words": words,
    "max_words": words,
    "min_mean_word_length": mean_word_length,
    "max_mean_word_length": mean_word_length,
    "max_symbol_word_ratio": symbol_word_ratio,
    "min_alpha_words_ratio": alpha_words_ratio,
    "min_stop_words": stop_words,
    "max_duplicate_line_fraction": duplicate_line_fraction,
    "max_top_bigram_fraction": top_bigram_fraction,
    "max_policy_line_fraction": policy_line_fraction,
    "min_punctuated_line_fraction": punctuated_line_fraction,
}


def passes(rule: str, value: float, threshold: float) -> bool:
    return value >= threshold if rule.startswith("min_") else value <= threshold


def failed_rule(text: str, thresholds: dict[str, float]) -> tuple[str, float] | None:
    """The first rule (in ``thresholds``' order) the document fails, with its value; None when it passes all."""
    for rule, threshold in thresholds.items():
        if not passes(rule, value := RULES[rule](text), threshold):
            return rule, round(value, 4)
    return None
