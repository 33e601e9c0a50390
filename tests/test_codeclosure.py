"""Code digests follow each script's real imports, so editing any module a rule runs reruns it."""

from pathlib import Path

import pytest
from tokenwatt.common.codeclosure import DISPLAY_ONLY, READS, Library, closure, code_digest, read_files

SCRIPTS = Path(__file__).resolve().parents[1] / "workflow" / "scripts"


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    return tmp_path


def _names(paths, root):
    return [p.relative_to(root).as_posix() for p in paths]


def test_the_closure_follows_absolute_relative_and_nested_imports(tmp_path):
    root = _tree(
        tmp_path,
        {
            "run.py": "from tokenwatt.a import f\nimport os\n",
            "tokenwatt/__init__.py": "",
            "tokenwatt/a.py": "from .b import g\ndef f():\n    from . import c\n",
            "tokenwatt/b.py": "import numpy\n",
            "tokenwatt/c.py": "from tokenwatt import d\n",
            "tokenwatt/d.py": "",
            "tokenwatt/unused.py": "",
        },
    )
    assert _names(closure(root / "run.py", root), root) == [
        "run.py",
        "tokenwatt/__init__.py",
        "tokenwatt/a.py",
        "tokenwatt/b.py",
        "tokenwatt/c.py",
        "tokenwatt/d.py",
    ]


def test_editing_an_imported_module_changes_the_digest_and_an_unrelated_one_does_not(tmp_path):
    root = _tree(
        tmp_path,
        {
            "run.py": "from tokenwatt import a\n",
            "tokenwatt/__init__.py": "",
            "tokenwatt/a.py": "",
            "tokenwatt/other.py": "",
        },
    )
    before = code_digest(root / "run.py", root)
    (root / "tokenwatt/other.py").write_text("x = 1\n")
    assert code_digest(root / "run.py", root) == before
    (root / "tokenwatt/a.py").write_text("x = 1\n")
    assert code_digest(root / "run.py", root) != before


def test_the_chunk_rule_digest_covers_the_tokenizer_module_its_script_imports():
    assert "tokenwatt/data/tokenizer.py" in _names(closure(SCRIPTS / "chunk.py", SCRIPTS), SCRIPTS)


def test_every_rule_script_covers_every_tokenwatt_module_it_names():
    import re

    for script in SCRIPTS.glob("*.py"):
        text = script.read_text()
        named = {f"tokenwatt.{m}" for m in re.findall(r"(?:from|import) tokenwatt\.([\w.]+)", text)}
        named |= {f"tokenwatt.{m}" for m in re.findall(r"from tokenwatt import (\w+)", text)}
        covered = {
            p.relative_to(SCRIPTS).with_suffix("").as_posix().replace("/", ".").removesuffix(".__init__")
            for p in closure(script, SCRIPTS)
        }
        assert {n for n in named if n not in DISPLAY_ONLY} <= covered, (script.name, named - covered)


def test_one_library_read_for_every_rule_gives_each_rule_the_digest_it_gets_alone():
    library = Library(SCRIPTS)  # as a parse shares one (plan.study.Study)
    products = ("tokenwatt.analysis.scale", "tokenwatt.presentation.figures")
    asked = [(script, ()) for script in sorted(SCRIPTS.glob("*.py"))] + [
        (SCRIPTS / "analyse.py", (m,)) for m in products
    ]
    shared = [code_digest(script, SCRIPTS, also, library) for script, also in asked]
    assert shared == [code_digest(script, SCRIPTS, also) for script, also in asked]
    assert len(set(shared)) == len(asked)  # no two rules' closures the same


def test_the_trial_digest_leaves_out_the_analysis_so_a_formula_change_never_retrains():
    covered = _names(closure(SCRIPTS / "train_trial.py", SCRIPTS), SCRIPTS)
    assert "tokenwatt/analysis/efficiency.py" not in covered and "tokenwatt/analysis/quality.py" not in covered
    assert "tokenwatt/training/train.py" in covered and "tokenwatt/measurement/meters.py" in covered


def test_the_closure_follows_imports_inside_and_out_of_nested_packages(tmp_path):
    root = _tree(
        tmp_path,
        {
            "run.py": "from tokenwatt.analysis.stats import f\n",
            "tokenwatt/__init__.py": "",
            "tokenwatt/design.py": "",
            "tokenwatt/analysis/__init__.py": "",
            "tokenwatt/analysis/stats.py": "from .scale import s\nfrom ..design import d\nfrom .. import cost\n",
            "tokenwatt/analysis/scale.py": "from . import apa\n",
            "tokenwatt/analysis/apa.py": "",
            "tokenwatt/cost.py": "",
            "tokenwatt/unused.py": "",
        },
    )
    assert _names(closure(root / "run.py", root), root) == [
        "run.py",
        "tokenwatt/__init__.py",
        "tokenwatt/analysis/__init__.py",
        "tokenwatt/analysis/apa.py",
        "tokenwatt/analysis/scale.py",
        "tokenwatt/analysis/stats.py",
        "tokenwatt/cost.py",
        "tokenwatt/design.py",
    ]


def test_a_comment_or_a_reformatting_leaves_the_digest_and_a_changed_constant_changes_it(tmp_path):
    root = _tree(
        tmp_path,
        {
            "run.py": "from tokenwatt import a\n",
            "tokenwatt/__init__.py": "",
            "tokenwatt/a.py": "def f(x):\n    return x * 2\n",
        },
    )
    before = code_digest(root / "run.py", root)
    (root / "tokenwatt/a.py").write_text("# why: doubling\ndef f( x ):\n\n    return (x*2)  # twice\n")
    assert code_digest(root / "run.py", root) == before
    (root / "tokenwatt/a.py").write_text("def f(x):\n    return x * 3\n")
    assert code_digest(root / "run.py", root) != before


def test_a_docstring_leaves_the_digest_and_a_string_the_code_uses_changes_it(tmp_path):
    root = _tree(
        tmp_path,
        {
            "run.py": "from tokenwatt import a\n",
            "tokenwatt/__init__.py": "",
            "tokenwatt/a.py": "def f(x):\n    return x + 'J'\n\n\nclass C:\n    pass\n",
        },
    )
    before = code_digest(root / "run.py", root)
    (root / "tokenwatt/a.py").write_text(
        '"""Energy in joules."""\n\n\ndef f(x):\n    """Adds the unit."""\n    return x + \'J\'\n\n\n'
        'class C:\n    """Only a docstring."""\n'
    )
    assert code_digest(root / "run.py", root) == before
    (root / "tokenwatt/a.py").write_text("def f(x):\n    return x + 'kJ'\n\n\nclass C:\n    pass\n")
    assert code_digest(root / "run.py", root) != before


def test_a_module_that_is_only_a_docstring_digests_as_an_empty_one(tmp_path):
    files = {"run.py": "import tokenwatt.sub\n", "tokenwatt/__init__.py": "", "tokenwatt/sub/__init__.py": ""}
    root = _tree(tmp_path, files)
    before = code_digest(root / "run.py", root)
    (root / "tokenwatt/sub/__init__.py").write_text('"""The stage this package holds."""\n')
    assert code_digest(root / "run.py", root) == before


def test_a_new_release_number_leaves_the_digest_and_a_changed_constant_changes_it(tmp_path):
    files = {"run.py": "from tokenwatt import a\n", "tokenwatt/__init__.py": '__version__ = "0.1.0"\nLIMIT = 1\n'}
    root = _tree(tmp_path, {**files, "tokenwatt/a.py": "X = 1\n"})
    before = code_digest(root / "run.py", root)
    (root / "tokenwatt/__init__.py").write_text('__version__ = "0.2.0"\nLIMIT = 1\n')
    assert code_digest(root / "run.py", root) == before
    (root / "tokenwatt/__init__.py").write_text('__version__ = "0.2.0"\nLIMIT = 2\n')
    assert code_digest(root / "run.py", root) != before


def test_a_package_is_followed_before_a_module_of_the_same_name_as_python_imports_it(tmp_path):
    files = {"run.py": "import tokenwatt.x\n", "tokenwatt/__init__.py": "", "tokenwatt/x.py": "STALE = 1\n"}
    root = _tree(tmp_path, {**files, "tokenwatt/x/__init__.py": "LIVE = 1\n"})
    assert "tokenwatt/x/__init__.py" in _names(closure(root / "run.py", root), root)
    assert "tokenwatt/x.py" not in _names(closure(root / "run.py", root), root)


def test_editing_a_template_reruns_what_renders_it_and_nothing_else(tmp_path):
    module, folder = next(iter(READS.items()))
    files = {
        "report.py": "from tokenwatt.presentation import templating\n",
        "figures.py": "from tokenwatt.presentation import figures\n",
        "tokenwatt/__init__.py": "",
        "tokenwatt/presentation/__init__.py": "",
        "tokenwatt/presentation/figures.py": "",
        module: "",
        f"{folder}/page.html.j2": "<p>{{ x }}</p>\n",
    }
    root = _tree(tmp_path, files)
    report, figures = code_digest(root / "report.py", root), code_digest(root / "figures.py", root)
    # whitespace in a template is whitespace in the page: digested byte for byte
    (root / folder / "page.html.j2").write_text("<p>{{ x }} </p>\n")
    assert code_digest(root / "report.py", root) != report
    assert code_digest(root / "figures.py", root) == figures


def test_the_report_digests_its_templates_and_the_figures_rule_does_not():
    read = _names(read_files(closure(SCRIPTS / "report.py", SCRIPTS), SCRIPTS), SCRIPTS)
    assert "tokenwatt/presentation/templates/page.html.j2" in read
    assert "tokenwatt/presentation/templates/sections/statistics.html.j2" in read
    assert read_files(closure(SCRIPTS / "product_figures.py", SCRIPTS), SCRIPTS) == []


def test_parsed_modules_kept_between_runs_give_the_digests_a_fresh_parse_gives(tmp_path, monkeypatch):
    import subprocess
    import sys

    script = "from pathlib import Path; from tokenwatt.common.codeclosure import code_digest as d; "
    script += f"s = Path({str(SCRIPTS)!r}); print(d(s / 'report.py', s), d(s / 'train_trial.py', s))"

    def digests(cache: Path) -> str:
        env = {"PYTHONPATH": str(SCRIPTS), "TOKENWATT_CODE_CACHE": str(cache), "PATH": ""}
        return subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True).stdout

    cold = digests(tmp_path / "cache")
    assert cold.strip() and list((tmp_path / "cache").rglob("*.json"))  # parsed once, kept
    assert digests(tmp_path / "cache") == cold == digests(tmp_path / "other")
    for entry in (tmp_path / "cache").rglob("*.json"):
        entry.write_text("{not json")  # a damaged entry is parsed again, never trusted
    assert digests(tmp_path / "cache") == cold


def test_a_kept_parse_is_read_back_instead_of_parsing_again(tmp_path, monkeypatch):
    import tokenwatt.common.codeclosure as cc

    monkeypatch.setenv("TOKENWATT_CODE_CACHE", str(tmp_path / "cache"))
    files = {"run.py": "from tokenwatt import a\n", "tokenwatt/__init__.py": "", "tokenwatt/a.py": "x = 1  # a\n"}
    root = _tree(tmp_path / "tree", files)

    def forget():  # this process's memory of parsed modules gone: only the disk remains
        for cached in (cc._canonical, cc._imported):
            cached.cache_clear()

    forget()
    cold = code_digest(root / "run.py", root)
    forget()

    def no_parse(*args):
        raise AssertionError("parsed again")

    monkeypatch.setattr(cc, "_printed", no_parse)
    monkeypatch.setattr(cc, "_parse_imports", no_parse)
    assert code_digest(root / "run.py", root) == cold
    (root / "tokenwatt/a.py").write_text("x = 2  # a\n")  # new source text: a new key, parsed (and refused here)
    with pytest.raises(AssertionError, match="parsed again"):
        code_digest(root / "run.py", root)
