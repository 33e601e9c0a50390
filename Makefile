# Two commands on a fresh machine (each installs what it needs first):
#   make study   - run the embedded default study  -> results/report.html
#   make test    - run the test suite
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: study test system-deps

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

test: $(STAMP) system-deps
	HF_HUB_DISABLE_PROGRESS_BARS=1 $(BIN)/python -m pytest -q
