"""Write workflow/MANIFEST.txt from the folders it lists: every file a remote module source must fetch.

Usage: python tools/manifest.py [--check]

A github(...) or gitlab(...) module source fetches only what a directive names; rules/mirror.smk fetches the rest
(the library, the scripts, schemas, captions and resources) from this list. Run it after adding, moving or removing a
file under those folders; tests/test_environment.py fails, naming this command, while the file differs from what it
would write. --check writes nothing and exits 1 where the file is out of date.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MANIFEST = Path("workflow", "MANIFEST.txt")
FOLDERS = ("resources", "workflow/schemas", "workflow/report", "workflow/scripts")
HEADER = """\
# Every file tokenwatt reads from its own folder but the rule files and the conda envs (Snakemake fetches those):
# the library, the scripts, schemas, captions and resources. A remote module source (github(...), gitlab(...))
# fetches these before the library is imported. Paths from the repository's root, sorted. Written by
# `python tools/manifest.py`, never by hand: tests/test_environment.py keeps it equal to the folders' contents.
"""


def shipped_files(root: Path = ROOT) -> list[str]:
    """Every file under FOLDERS, from the repository's root, sorted; Python's caches left out (made where it runs)."""
    return sorted(
        path.relative_to(root).as_posix()
        for folder in FOLDERS
        for path in (root / folder).rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    )


def manifest_text(root: Path = ROOT) -> str:
    """The manifest as this tool writes it: the header, then one path per line."""
    return HEADER + "".join(f"{path}\n" for path in shipped_files(root))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="exit 1 where the manifest is out of date; write nothing")
    args = ap.parse_args(argv)
    path, text = ROOT / MANIFEST, manifest_text()
    if path.read_text(encoding="utf-8") == text:
        return 0
    if args.check:
        print(f"{MANIFEST} is out of date: run python tools/manifest.py", file=sys.stderr)
        return 1
    path.write_text(text, encoding="utf-8")
    print(f"wrote {MANIFEST} ({len(text.splitlines())} lines)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
