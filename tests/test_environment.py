import re
import runpy

import yaml


def _pins(lines):
    return sorted(line.strip() for line in lines if re.match(r"^[A-Za-z0-9_.\-]+==", line.strip()))


def test_conda_environment_and_pip_requirements_pin_the_same_packages(root):
    env = yaml.safe_load((root / "environment.yml").read_text())
    pip_section = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    requirements = _pins((root / "requirements.txt").read_text().splitlines())
    assert requirements and _pins(pip_section) == requirements
    assert "python=3.11" in env["dependencies"]


def test_installed_versions_match_the_pins(root):
    from importlib.metadata import version

    for pin in _pins((root / "requirements.txt").read_text().splitlines()):
        name, wanted = pin.split("==")
        assert version(name).split("+")[0] == wanted, name


# Import names whose distribution is named otherwise.
DISTRIBUTION = {"yaml": "pyyaml", "pynvml": "nvidia-ml-py"}


def _rules(root):
    """(rule file, rule name, script, conda env) of every rule that runs a script."""
    for smk in sorted((root / "workflow" / "rules").glob("*.smk")):
        # a named rule, or one a loop makes (`rule:` with its name given under `name:`)
        for block in re.split(r"^\s*rule\b ?", smk.read_text(), flags=re.M)[1:]:
            script = re.search(r'script:\s*"\.\./scripts/([^"]+)"', block)
            conda = re.search(r'conda:\s*"\.\./envs/([^"]+)"', block)
            name = block.split(":")[0] or "(made in a loop)"
            yield smk.name, name, script and script.group(1), conda and conda.group(1)


def _third_party_imports(root, script):
    import ast
    import sys

    from tokenwatt.common.codeclosure import closure

    scripts = root / "workflow" / "scripts"
    names = set()
    for path in closure(scripts / script, scripts):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                names.add(node.module.split(".")[0])
    return {DISTRIBUTION.get(n, n) for n in names - set(sys.stdlib_module_names) - {"tokenwatt", "__future__"}}


def test_every_stage_environment_pins_packages_as_the_requirements_do(root):
    requirements = set(_pins((root / "requirements.txt").read_text().splitlines()))
    envs = sorted((root / "workflow" / "envs").glob("*.yaml"))
    assert [e.stem for e in envs] == ["analysis", "data", "train"]
    for env in envs:
        spec = yaml.safe_load(env.read_text())
        pins = _pins(next(d["pip"] for d in spec["dependencies"] if isinstance(d, dict)))
        assert pins and set(pins) <= requirements, env.name
        assert "python=3.11" in spec["dependencies"], env.name


def test_every_rule_runs_in_a_stage_environment_that_has_every_package_its_code_imports(root):
    checked = 0
    for smk, rule, script, conda in _rules(root):
        if script is None:
            continue
        assert conda, f"{smk}: rule {rule} has no conda env under workflow/envs"
        spec = yaml.safe_load((root / "workflow" / "envs" / conda).read_text())
        pinned = {p.split("==")[0] for p in _pins(next(d["pip"] for d in spec["dependencies"] if isinstance(d, dict)))}
        missing = _third_party_imports(root, script) - pinned
        assert not missing, f"{smk}: rule {rule} ({script}) imports {sorted(missing)}, absent from envs/{conda}"
        checked += 1
    assert checked >= 14  # a rule made in a loop (one per data step, product, product's figures) counts once


def test_only_the_training_stage_environment_installs_torch(root):
    for env in (root / "workflow" / "envs").glob("*.yaml"):
        assert ("torch==" in env.read_text()) == (env.stem == "train"), env.name


def test_the_manifest_lists_every_file_a_remote_module_source_must_fetch(root):
    # A github(...) module source fetches only what a directive names; the rule files fetch the rest from this list,
    # which tools/manifest.py computes from the folders and writes.
    tool = runpy.run_path(str(root / "tools" / "manifest.py"))
    written = (root / "workflow" / "MANIFEST.txt").read_text().splitlines()
    assert written == tool["manifest_text"](root).splitlines(), "out of date: run .venv/bin/python tools/manifest.py"


def test_every_file_a_remote_source_fetches_ends_in_exactly_one_newline(root):
    # Snakemake's git sources drop a file's last newline; the rule files add one back, exact only for these files.
    listed = [line for line in (root / "workflow" / "MANIFEST.txt").read_text().splitlines() if line and line[0] != "#"]
    for path in listed:
        content = (root / path).read_bytes()
        assert content.endswith(b"\n") and not content.endswith(b"\n\n") and b"\r" not in content, path
