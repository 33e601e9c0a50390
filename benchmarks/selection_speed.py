"""Benchmark: documents per second of the selection stage, beside a plain exact-dedup pass, on the embedded default
corpus's documents (config/config.yaml's corpus.synthetic: its stories and seed) and on ``--scale`` times as many.

Times, on the same documents: exact deduplication (a hash per text, as normalize does), near-duplicate removal
(tokenwatt.selection: datasketch MinHash LSH, each candidate confirmed by its exact Jaccard), the quality rules of
config/selection.yaml, the training order of config/selection-curriculum.yaml (a curriculum by words),
and, where rensa is installed, rensa's MinHash LSH with the same shingles (the candidate the
library was chosen against; its banding is set by hand: 16 bands of 8 rows for 128 permutations). Generating the
documents is not timed. Prints documents per second and each step's ratio to exact dedup. Name the CPU beside the
figures (/proc/cpuinfo): they are this machine's.

Usage: .venv/bin/python benchmarks/selection_speed.py [--scale 100] [--repeats 1]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import polars as pl
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "workflow" / "scripts"))

from tokenwatt.data.corpus import load_grammar, synthetic_corpus  # noqa: E402
from tokenwatt.selection.near_dup import shingles  # noqa: E402
from tokenwatt.selection.order import order_documents  # noqa: E402
from tokenwatt.selection.steps import apply_filters, remove_near_duplicates  # noqa: E402

STUDY = yaml.safe_load((ROOT / "config" / "selection.yaml").read_text())
NEAR_DUP = STUDY["selection"]["near_dup"]
FILTERS = STUDY["design"]["selection"]["dedup-filter"]["filters"]
CURRICULUM = yaml.safe_load((ROOT / "config" / "selection-curriculum.yaml").read_text())["design"]["selection"]
ORDER = CURRICULUM["dedup-filter-short-first"]["order"]


def exact_dedup(docs: pl.DataFrame) -> pl.DataFrame:
    return docs.unique(subset="text", keep="first", maintain_order=True)


def rensa_dedup(docs: pl.DataFrame) -> int:
    import rensa

    lsh = rensa.RMinHashLSH(threshold=NEAR_DUP["threshold"], num_perm=NEAR_DUP["permutations"], num_bands=16)
    removed = 0
    for i, text in enumerate(docs["text"]):
        signature = rensa.RMinHash(num_perm=NEAR_DUP["permutations"], seed=1)
        signature.update([s.decode() for s in shingles(text, NEAR_DUP["shingle_size"])])
        if lsh.query(signature):
            removed += 1
        else:
            lsh.insert(i, signature)
    return removed


def timed(step: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=int, default=100, help="the larger corpus, in multiples of the default's")
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    default = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())["corpus"]["synthetic"]
    grammar = load_grammar(ROOT / default["grammar"])
    try:
        import rensa  # noqa: F401

        candidates = {"rensa MinHash LSH (near-dup count only)": rensa_dedup}
    except ImportError:
        candidates = {}
        print("rensa not installed: its line is left out (pip install rensa==0.5.0 to compare)")
    for scale in (1, args.scale):
        docs = synthetic_corpus(grammar, default["documents"] * scale, default["seed"])
        steps = {
            "exact dedup (hash per text)": lambda: exact_dedup(docs),
            "near-dup (datasketch, exact Jaccard check)": lambda: remove_near_duplicates(docs, NEAR_DUP, seed=1),
            "quality rules (config/selection.yaml)": lambda: apply_filters(docs, FILTERS),
            "curriculum by words (order step)": lambda: order_documents(docs, ORDER),
            **{name: (lambda f=f: f(docs)) for name, f in candidates.items()},
        }
        print(f"\n{docs.height:,} documents ({scale}x the default corpus)")
        base = None
        for name, step in steps.items():
            seconds = timed(step, args.repeats)
            base = base or seconds
            print(f"  {name:46s} {seconds:9.2f} s  {docs.height / seconds:12,.0f} docs/s  x{seconds / base:8.1f}")


if __name__ == "__main__":
    main()
