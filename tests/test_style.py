"""The catalog's conventions, checked: snakefmt-formatted Snakefile and rule files, a ruff-clean and ruff-formatted
code base (pyproject.toml says which rules, and why some are off)."""

import subprocess
import sys
from pathlib import Path

BIN = Path(sys.executable).parent


def _run(root, *args):
    return subprocess.run([str(BIN / args[0]), *args[1:]], cwd=root, capture_output=True, text=True)


def test_the_snakefile_and_rule_files_are_snakefmt_formatted(root):
    proc = _run(root, "snakefmt", "--check", "workflow")
    assert proc.returncode == 0, proc.stderr[-3000:]


def test_the_python_code_passes_ruff_check(root):
    proc = _run(root, "ruff", "check", ".")
    assert proc.returncode == 0, proc.stdout[-3000:]


def test_the_python_code_is_ruff_formatted(root):
    proc = _run(root, "ruff", "format", "--check", ".")
    assert proc.returncode == 0, proc.stdout[-3000:]
