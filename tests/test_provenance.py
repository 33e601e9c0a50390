"""The report says with which code and when it was made."""

import subprocess

from tokenwatt.common.provenance import git_state, versions


def test_a_folder_outside_git_says_so(tmp_path):
    assert git_state(tmp_path) == "not a git checkout"


def test_the_git_state_names_the_commit_and_whether_the_tree_was_dirty(tmp_path):
    run = lambda *a: subprocess.run(["git", "-C", str(tmp_path), *a], check=True, capture_output=True)  # noqa: E731
    run("init", "-q")
    (tmp_path / "a.txt").write_text("1")
    run("add", "a.txt")
    run("-c", "user.name=t", "-c", "user.email=t@example.org", "commit", "-qm", "x")
    assert git_state(tmp_path).endswith("(clean)")
    (tmp_path / "a.txt").write_text("2")
    assert git_state(tmp_path).endswith("with uncommitted changes")


def test_versions_of_the_analysis_packages_are_read_from_the_installation():
    got = versions(("polars", "no-such-package-xyz"))
    assert got["polars"][0].isdigit() and got["no-such-package-xyz"] == "not installed"
