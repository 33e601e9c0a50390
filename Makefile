# Two commands on a fresh machine, and a third for the edit-test loop (each installs what it needs first):
#   make study   - run the embedded default study  -> results/report.html
#   make test    - run the test suite
#   make test-fast - the suite without the Snakemake and SLURM tests, for the edit-test loop
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

# Two pytest workers per core, at most 16 (pytest-xdist), each on one thread (tests/conftest.py): a workflow test
# spends much of its time on one core or none (a study's jobs one after another, a trial's idle baseline, a SLURM
# status check), so one worker per core left ~37 % of the two cores idle. The SLURM tests share one cluster, brought up
# once per run and taken down when every worker has ended (tests/conftest.py).
WORKERS ?= $(shell n=$$(nproc); echo $$((n > 8 ? 16 : 2 * n)))
PYTEST := HF_HUB_DISABLE_PROGRESS_BARS=1 $(BIN)/python -m pytest -q -n $(WORKERS)

.PHONY: study test test-fast system-deps

$(STAMP): requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -r requirements.txt
	touch $@

# Debian packages the tests use: Chromium renders the report, Graphviz draws the DAG, git serves a module release.
system-deps:
	@command -v chromium >/dev/null && command -v dot >/dev/null && command -v git >/dev/null || \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium graphviz git >/dev/null; }

study: $(STAMP)
	HF_HUB_DISABLE_PROGRESS_BARS=1 $(BIN)/snakemake --cores 2 --resources gpu=1

# The 20 slowest tests close the run: where the suite's time goes (docs/benchmarks.md keeps a measured list).
test: $(STAMP) system-deps
	$(PYTEST) --durations=20

test-fast: $(STAMP) system-deps
	$(PYTEST) -m "not workflow and not cluster"
