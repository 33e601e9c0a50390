"""Near-duplicate removal by MinHash LSH (datasketch), every candidate confirmed by its exact Jaccard similarity.

datasketch was chosen over rensa, which is faster (benchmarks/selection_speed.py, on a 2-core AMD EPYC: rensa's
MinHash LSH 0.50 s for the default corpus's 8 000 documents, this step 2.4-3.1 s with its exact Jaccard checks and
record), because datasketch derives the LSH bands and rows from the Jaccard threshold itself (rensa asks for them),
depends only on numpy and scipy, which the data stage has anyway, and is the long-maintained reference
implementation; at a study's scale the difference is seconds beside minutes of training, and the step's own energy is
metered and reported either way. datatrove's MinHash is a four-stage pipeline over sharded files, built for corpora a
single process cannot hold, not a step inside one rule.

LSH only proposes candidates; the exact Jaccard of the two shingle sets decides, so a pair is removed exactly when it
reaches the threshold (the LSH may miss a pair near the threshold, never invent one).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from datasketch import MinHash, MinHashLSH


@dataclass(frozen=True)
class Match:
    """A removed document: its position, the earlier (or evaluation) document it copies, and their Jaccard."""

    index: int
    of: str
    jaccard: float


def shingles(text: str, size: int) -> set[bytes]:
    """The document's word ``size``-grams (lower-cased); a document shorter than ``size`` words is one shingle."""
    words = text.lower().split()
    return {" ".join(words[i : i + size]).encode() for i in range(max(1, len(words) - size + 1))}


def jaccard(a: set[bytes], b: set[bytes]) -> float:
    return len(a & b) / len(a | b) if a or b else 1.0


def near_duplicates(
    texts: Sequence[str],
    shingle_size: int,
    permutations: int,
    threshold: float,
    seed: int,
    reference: Sequence[str] = (),
    within: bool = True,
) -> list[Match]:
    """Every document of ``texts`` whose Jaccard similarity reaches ``threshold`` with a ``reference`` document (named
    ``eval:<index>``) or, ``within``, with an earlier kept document of ``texts`` (``train:<index>``).

    The first of a group is kept, in the order read, so the result depends only on the inputs and settings.
    """
    sets = [shingles(t, shingle_size) for t in [*reference, *texts]]
    signatures = MinHash.bulk(sets, num_perm=permutations, seed=seed)
    lsh = MinHashLSH(threshold=threshold, num_perm=permutations)
    keys = [f"eval:{i}" for i in range(len(reference))] + [f"train:{i}" for i in range(len(texts))]
    for key, signature in zip(keys[: len(reference)], signatures, strict=False):
        lsh.insert(key, signature)
    matches = []
    for position in range(len(reference), len(keys)):
        found = [
            (jaccard(sets[position], sets[_position(key, len(reference))]), key)
            for key in sorted(lsh.query(signatures[position]))
        ]
        # the most similar candidate names the match (max keeps the first of a tie: a reproducible record)
        best = max(found, key=lambda pair: pair[0], default=(0.0, ""))
        if best[0] >= threshold:
            matches.append(Match(position - len(reference), best[1], round(best[0], 4)))
        elif within:
            lsh.insert(keys[position], signatures[position])
    return matches


def _position(key: str, n_reference: int) -> int:
    kind, index = key.split(":")
    return int(index) + (n_reference if kind == "train" else 0)
