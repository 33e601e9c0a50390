"""The library's stages are floors: a module imports from its own stage or the stages below it, never above.

Bottom up: ``common`` (file I/O, records, the store, the measures' vocabulary) knows no stage; ``measurement`` knows
devices and meters, not the study; ``plan`` knows the study and the config's rules (presets, stopping, cost) and asks
the meters what they can measure; ``data`` and ``training`` carry the plan out; ``analysis`` reads what they recorded;
``presentation`` shows it. An import up the order makes a package-level loop (plan ↔ analysis) and drags a stage's
dependencies into another's job: the check reads every import, lazy ones inside functions included, through the same
parser the code digests use.
"""

from pathlib import Path

import pytest
from tokenwatt.common.codeclosure import PACKAGE, _imported

FLOORS = ["common", "measurement", "plan", "data", "selection", "training", "analysis", "presentation"]
LIBRARY = Path(__file__).resolve().parents[1] / "workflow" / "scripts" / PACKAGE


def upward_imports(floors: list[str], library: Path) -> list[str]:
    """Each import of a module on a higher floor than its importer's, as 'importer -> imported'."""
    found = set()
    for floor, stage in enumerate(floors):
        for path in sorted((library / stage).rglob("*.py")):
            parts = path.relative_to(library.parent).with_suffix("").parts
            module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            # the package a relative import resolves against: a package's __init__ is its own package
            anchor = f"{module}.__init__" if parts[-1] == "__init__" else module
            for name in _imported(path.read_text(encoding="utf-8"), anchor):
                target = name.split(".")[1] if name.count(".") else None
                if target in floors and floors.index(target) > floor:
                    # to the module: `from ..x.y import f` also names x.y.f, one import
                    found.add(f"{module} -> {'.'.join(name.split('.')[:3])}")
    return sorted(found)


def test_every_floor_is_a_package_of_the_library():
    assert all((LIBRARY / stage / "__init__.py").is_file() for stage in FLOORS)


def test_no_stage_imports_from_a_stage_above_it():
    assert upward_imports(FLOORS, LIBRARY) == []


@pytest.mark.parametrize(
    ("source", "names"),
    [
        ("from ..analysis.frame import frame\n", "plan.design -> analysis.frame"),
        ("def f():\n    from tokenwatt.presentation import figures\n", "plan.design -> presentation.figures"),
    ],
)
def test_the_check_sees_an_upward_import_at_any_depth(tmp_path, source, names):
    for stage in ("plan", "analysis", "presentation"):
        (tmp_path / PACKAGE / stage).mkdir(parents=True)
        (tmp_path / PACKAGE / stage / "__init__.py").write_text("")
    (tmp_path / PACKAGE / "plan" / "design.py").write_text(source)
    found = upward_imports(["plan", "analysis", "presentation"], tmp_path / PACKAGE)
    assert names in [f.replace(f"{PACKAGE}.", "") for f in found]
