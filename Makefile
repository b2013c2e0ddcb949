# tokbench: two commands do all the set-up on a fresh machine.
#   make demo   — install, then run suites/smoke.yaml on the embedded stdlib text (CPU, minutes)
#   make test   — install, then run the whole test suite
PY      ?= python3
VENV    ?= .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed

.PHONY: demo test setup system lint sanity clean

demo: setup
	$(BIN)/tokbench run suites/smoke.yaml

test: setup
	$(BIN)/python -m pytest -q -p no:cacheprovider

sanity: setup
	$(BIN)/tokbench sanity

lint: setup
	$(BIN)/ruff check .

setup: $(STAMP)

# torch is pinned to the CPU wheel these machines carry locally; an open range pulls a CUDA build.
# The stamp is touched last: a failed step (pip, or apt in `system`) leaves set-up not done, so
# the next `make setup` runs it again.
$(STAMP): pyproject.toml tools/system_packages.sh
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[dev,hf]'
	@$(MAKE) --no-print-directory system
	touch $(STAMP)

# Headless Chromium (report test) and fonts for every script the multilingual reports show.
# Needs root and apt-get (as in CI); elsewhere it is skipped with a message and the Chromium test
# skips. Waits for / retries a held apt lock; fails (exit 1) if apt still fails. SYSTEM=0 skips.
SYSTEM ?= 1
system:
	@if [ "$(SYSTEM)" = "0" ]; then echo "system packages skipped (SYSTEM=0)"; \
	else sh tools/system_packages.sh; fi

clean:
	rm -rf $(VENV) runs .pytest_cache
