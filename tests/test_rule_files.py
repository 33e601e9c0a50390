"""The rule files define rules and little else: paths, params and checks live in the library (tokenwatt.plan.layout,
tokenwatt.plan.study, tokenwatt.plan.startup, tokenwatt.selection.catalog), where they are tested without Snakemake."""

import re
from pathlib import Path

RULES = sorted((Path(__file__).resolve().parents[1] / "workflow" / "rules").glob("*.smk"))
# A block whose indented body is Snakemake's, not helper Python.
DIRECTIVE = re.compile(r"^\s*(rule\b|use rule\b|checkpoint\b|include:|wildcard_constraints:|localrules:)")
ASSIGNED = re.compile(r"^(?:for\s+)?([A-Za-z_]\w*(?:\s*,\s*[A-Za-z_]\w*)*)\s*(?:=(?!=)|\bin\b)")


def helper_lines(text: str) -> list[str]:
    """The lines of a rule file that are Python of its own: outside every rule and directive block, neither blank
    nor a comment."""
    found, inside = [], None
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        indent = len(line) - len(line.lstrip())
        if inside is not None and indent > inside:
            continue
        inside = indent if DIRECTIVE.match(line) else None
        if inside is None:
            found.append(line)
    return found


def module_globals(text: str) -> set[str]:
    """The names a rule file assigns at its top level (loop variables included); imports and functions not counted."""
    return {
        name.strip()
        for line in text.splitlines()
        for m in [ASSIGNED.match(line)]
        if m
        for name in m.group(1).split(",")
    }


def test_the_counters_see_helper_python_and_not_rules():
    text = "X = 1\nfor _a, _b in y:\n\n    rule:\n        input:\n            f(x)\n# note\ndef f(x):\n    return x\n"
    assert helper_lines(text) == ["X = 1", "for _a, _b in y:", "def f(x):", "    return x"]
    assert module_globals(text) == {"X", "_a", "_b"}


def test_the_rule_files_hold_at_most_300_lines_of_helper_python_and_8_module_globals():
    lines = [line for path in RULES for line in helper_lines(path.read_text())]
    names = set().union(*(module_globals(path.read_text()) for path in RULES))
    assert len(lines) <= 300, f"{len(lines)} lines of helper Python under workflow/rules/"
    assert len(names) <= 8, sorted(names)


def test_no_rule_file_reads_a_global_that_a_file_included_after_it_defines():
    order = ["mirror.smk", "common.smk", "preflight.smk", "corpus.smk", "selection.smk", "tokens.smk", "train.smk"]
    order += ["allocation.smk", "analysis.smk", "report.smk", "interim.smk"]
    assert sorted(order) == [p.name for p in RULES]  # every rule file is in the order the Snakefile includes them
    texts = {p.name: p.read_text() for p in RULES}
    for i, name in enumerate(order):
        later = set().union(*(module_globals(texts[n]) for n in order[i + 1 :]))
        read = set(re.findall(r"\b[A-Za-z_]\w*\b", texts[name]))
        assert not (later & read) - module_globals(texts[name]), (name, later & read)


def test_the_modules_the_rule_files_import_at_parse_time_load_no_numerical_library():
    """Every Snakemake start (a dry run, each job's own Snakemake on a cluster node) parses the rule files: the
    tokenwatt modules they import at their top level load none of scipy, statsmodels, matplotlib or torch (the jobs
    that compute import them; datasketch's scipy took ~0.25 s of every start). Found by reading the rule files, so a
    new import is checked too. (polars and numpy load: the selection steps' catalog and the run order use them.)"""
    import subprocess
    import sys

    files = [*RULES, RULES[0].parent.parent / "Snakefile"]
    top = re.compile(r"^(?:from (tokenwatt[\w.]*) import|import (tokenwatt[\w.]*))", re.M)
    modules = sorted({a or b for f in files for a, b in top.findall(f.read_text())})
    assert "tokenwatt.plan.study" in modules and "tokenwatt.selection.catalog" in modules, modules
    heavy = ("scipy", "statsmodels", "matplotlib", "torch")
    code = f"import sys\nfor m in {modules!r}: __import__(m)\nprint([m for m in {heavy!r} if m in sys.modules])"
    scripts = RULES[0].parent.parent / "scripts"
    out = subprocess.run([sys.executable, "-c", code], cwd=scripts, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout
