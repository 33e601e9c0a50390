"""What a successful run ends with: the answer's few sentences and the report they come from, as a file:// URL.

The report rule writes the answer beside the report (``answer_path``: results/answer.txt, and the interim report's
beside it under results/interim/); the Snakefile's ``onsuccess`` has it printed, for each report this run made, as
Snakemake exits (``at_exit``): after Snakemake's own closing lines, so that the answer and the report's URL are the
last lines of the run. Standard library only: it runs in the main Snakemake process at the end of every successful
run, and nothing here may fail that run (a report or an answer that is missing or unreadable prints nothing).
"""

from __future__ import annotations

import atexit
import shutil
import sys
import textwrap
from collections.abc import Iterable
from pathlib import Path
from typing import TextIO

from ..plan.layout import answer_path


def finished_lines(reports: Iterable[str | Path], since: float, width: int = 100) -> list[str]:
    """The lines that end a run: for each report made at or after ``since`` (this run's start, in seconds since the
    epoch) whose answer file is there, its answer wrapped to ``width`` and then the report's file:// URL, last, where
    a reader looks. None for a report this run did not make (a run of the data stage only says nothing old)."""
    lines: list[str] = []
    for report in map(Path, reports):
        answer = Path(answer_path(report))
        try:
            if report.stat().st_mtime < since:
                continue
            said = [s.strip() for s in answer.read_text(encoding="utf-8").splitlines() if s.strip()]
        except (OSError, UnicodeDecodeError):
            continue
        interim = report.parent.name == "interim"
        lines.append(
            f"tokenwatt {'INTERIM ' if interim else ''}answer{' (the trials finished so far)' if interim else ''}:"
        )
        lines += [
            wrapped for s in said for wrapped in textwrap.wrap(s, width, initial_indent="  ", subsequent_indent="    ")
        ]
        lines.append(f"The report, every number with its interval and the caveats: {report.resolve().as_uri()}")
    return lines


def print_finished(reports: Iterable[str | Path], since: float, out: TextIO | None = None) -> None:
    """``finished_lines`` printed; never raises, so a successful run stays successful whatever the files hold."""
    try:
        width = max(60, min(120, shutil.get_terminal_size((100, 24)).columns - 2))
        lines = finished_lines(reports, since, width)
        if lines:
            print("\n" + "\n".join(lines), file=out or sys.stdout, flush=True)
    except Exception:  # the end of a run that succeeded: nothing said is better than a failure
        return


def at_exit(reports: Iterable[str | Path], since: float) -> None:
    """``print_finished`` when the Python process ends (Snakemake's onsuccess runs before it logs the workflow's
    end, its log's path and its run time; a line printed then would be buried under them)."""
    atexit.register(print_finished, list(reports), since)
