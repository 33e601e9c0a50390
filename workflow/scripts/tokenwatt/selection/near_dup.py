"""Near-duplicate removal by MinHash LSH (datasketch), every candidate confirmed by its exact Jaccard similarity.

datasketch was chosen over rensa, which is faster (benchmarks/selection_speed.py, on a 2-core AMD EPYC: rensa's
MinHash LSH 0.50 s for the default corpus's 8 000 documents, this step 2.4-3.1 s with its exact Jaccard checks and
record), because datasketch derives the LSH bands and rows from the Jaccard threshold itself (rensa asks for them),
depends only on numpy and scipy, which the data stage has anyway, and is the long-maintained reference
implementation; at a study's scale the difference is seconds beside minutes of training, and the step's own energy is
metered and reported either way. datatrove's MinHash is a four-stage pipeline over sharded files, built for corpora a
single process cannot hold, not a step inside one rule.

Against the eval documents the question is another: not whether two documents are alike (Jaccard, which a long
training document that holds an eval story verbatim keeps far below any threshold: 0.45 for a 60-word story inside a
136-word document) but whether a training document holds an eval document (``eval_copies``: the share of the eval
document's shingles found in it, its containment). That is exact, by an inverted index of the eval shingles: one
pass over the training shingles, no LSH to miss a pair. Within a level, LSH proposes candidates
with its false negatives weighted 9 to 1 against false positives, and the exact Jaccard of the two shingle sets
decides, so a removed pair always reaches the threshold; a pair just above it may still be missed, rarely.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

# LSH's weights of (false positives, false negatives) when it chooses its bands: recall first, since the exact Jaccard
# check removes every false positive afterwards.
RECALL_WEIGHTS = (0.1, 0.9)


class NearDupSettingsError(ValueError):
    """Settings MinHash LSH cannot band (too few permutations for the threshold); the message names the keys."""


@dataclass(frozen=True)
class Match:
    """A removed document: its position, the document it copies (``train:<i>`` an earlier one, ``eval:<i>`` an eval
    document), and how alike they are (Jaccard within a level, containment against the eval set)."""

    index: int
    of: str
    similarity: float


def shingles(text: str, size: int) -> set[bytes]:
    """The document's word ``size``-grams (lower-cased); a document shorter than ``size`` words is one shingle."""
    words = text.lower().split()
    return {" ".join(words[i : i + size]).encode() for i in range(max(1, len(words) - size + 1))}


def jaccard(a: set[bytes], b: set[bytes]) -> float:
    return len(a & b) / len(a | b) if a or b else 1.0


def near_duplicates(
    texts: Sequence[str], shingle_size: int, permutations: int, threshold: float, seed: int
) -> list[Match]:
    """Every document of ``texts`` whose Jaccard similarity reaches ``threshold`` with an earlier kept document
    (``train:<index>``). The first of a group is kept, in the order read, so the result depends only on the inputs
    and settings."""
    # datasketch imports scipy and numpy: imported here, not with the module, which every Snakemake start loads
    from datasketch import MinHash, MinHashLSH

    sets = [shingles(t, shingle_size) for t in texts]
    try:
        lsh = MinHashLSH(threshold=threshold, num_perm=permutations, weights=RECALL_WEIGHTS)
    except ValueError as err:
        raise NearDupSettingsError(
            f"selection near_dup: permutations {permutations} with threshold {threshold:g} cannot be split into LSH "
            f"bands ({err}); raise permutations (128 is the default) or lower threshold below 1"
        ) from err
    signatures = MinHash.bulk(sets, num_perm=permutations, seed=seed)
    matches = []
    for position, own in enumerate(sets):
        found = [(jaccard(own, sets[int(key[6:])]), key) for key in sorted(lsh.query(signatures[position]))]
        # the most similar names the match (max keeps the first of a tie: a reproducible record)
        best = max(found, key=lambda pair: pair[0], default=(0.0, ""))
        if best[0] >= threshold:
            matches.append(Match(position, best[1], round(best[0], 4)))
        else:
            lsh.insert(f"train:{position}", signatures[position])
    return matches


def eval_copies(texts: Sequence[str], reference: Sequence[str], shingle_size: int, containment: float) -> list[Match]:
    """Every document of ``texts`` that holds at least ``containment`` of some ``reference`` (eval) document's
    shingles (``eval:<index>``; the eval document it holds most of names the match, the first of a tie). Exact: each
    training shingle is looked up in an index of the eval shingles."""
    ref_sets = [shingles(t, shingle_size) for t in reference]
    holders: dict[bytes, list[int]] = {}
    for i, ref in enumerate(ref_sets):
        for shingle in ref:
            holders.setdefault(shingle, []).append(i)
    matches = []
    for position, text in enumerate(texts):
        hits: dict[int, int] = {}
        for shingle in shingles(text, shingle_size):
            for i in holders.get(shingle, ()):
                hits[i] = hits.get(i, 0) + 1
        shares = [(n / len(ref_sets[i]), -i) for i, n in hits.items()]
        if shares and (best := max(shares))[0] >= containment:
            matches.append(Match(position, f"eval:{-best[1]}", round(best[0], 4)))
    return matches
