import re

import yaml


def _pins(lines):
    return sorted(l.strip() for l in lines if re.match(r"^[A-Za-z0-9_.\-]+==", l.strip()))


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
