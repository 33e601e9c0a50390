"""Where and with what a report was made: the code's git state and the analysis packages' versions."""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

PACKAGES = ("snakemake", "torch", "transformers", "pingouin", "statsmodels", "polars", "scipy", "nvidia-ml-py")


def git_state(folder: str | Path) -> str:
    """Commit of the workflow's checkout and whether it had uncommitted changes ("not a git checkout" otherwise)."""

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(folder), *args], capture_output=True, text=True, check=True, timeout=10
        ).stdout.strip()

    try:
        commit = git("rev-parse", "--short=12", "HEAD")
        dirty = git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError):
        return "not a git checkout"
    return f"{commit}" + (" with uncommitted changes" if dirty else " (clean)")


def versions(packages: tuple[str, ...] = PACKAGES) -> dict[str, str]:
    out = {}
    for name in packages:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def utc(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, tz=UTC).strftime("%Y-%m-%d %H:%M UTC")
