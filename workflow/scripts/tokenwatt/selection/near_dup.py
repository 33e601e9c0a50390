"""Near-duplicate removal by MinHash LSH (datasketch), every candidate confirmed by its exact Jaccard similarity.

datasketch was chosen over rensa, which is faster (benchmarks/selection_speed.py, on a 2-core AMD EPYC: rensa's
MinHash LSH 0.50 s for the default corpus's 8 000 documents, this step 2.4-3.1 s with its exact Jaccard checks and
record), because datasketch derives the LSH bands and rows from the Jaccard threshold itself (rensa asks for them),
depends only on numpy and scipy, which the data stage has anyway, and is the long-maintained reference
implementation; at a study's scale the difference is seconds beside minutes of training, and the step's own energy is
metered and reported either way. datatrove's MinHash is a four-stage pipeline over sharded files, built for corpora a
single process cannot hold, not a step inside one rule.

Against the eval documents (``reference``) there is no LSH at all: the eval set is small (a hundred documents), so
every training document is compared with every eval document by exact Jaccard, and a training document that reaches
the threshold with any of them is removed, without exception: no level is scored on text it trained on. (With LSH
at the threshold, 14 bands of 9 rows for 0.7 and 128 permutations, a pair at Jaccard 0.70 was proposed only 44 % of
the time, and 8 of 47 such training documents stayed in a review's test.) Within a level, LSH proposes candidates
with its false negatives weighted 9 to 1 against false positives, and the exact Jaccard of the two shingle sets
decides, so a removed pair always reaches the threshold; a pair just above it may still be missed, rarely.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from datasketch import MinHash, MinHashLSH

# LSH's weights of (false positives, false negatives) when it chooses its bands: recall first, since the exact Jaccard
# check removes every false positive afterwards.
RECALL_WEIGHTS = (0.1, 0.9)


class NearDupSettingsError(ValueError):
    """Settings MinHash LSH cannot band (too few permutations for the threshold); the message names the keys."""


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
    ref_sets = [shingles(t, shingle_size) for t in reference]
    sets = [shingles(t, shingle_size) for t in texts]
    lsh = None
    if within:
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
        found = [(jaccard(own, ref), f"eval:{i}") for i, ref in enumerate(ref_sets)]
        if lsh is not None:
            found += [(jaccard(own, sets[int(key[6:])]), key) for key in sorted(lsh.query(signatures[position]))]
        # the most similar names the match (max keeps the first of a tie: a reproducible record)
        best = max(found, key=lambda pair: pair[0], default=(0.0, ""))
        if best[0] >= threshold:
            matches.append(Match(position, best[1], round(best[0], 4)))
        elif lsh is not None:
            lsh.insert(f"train:{position}", signatures[position])
    return matches
