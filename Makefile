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
$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[dev]'
	-@$(MAKE) --no-print-directory system
	touch $(STAMP)

# Headless Chromium (report test) and fonts for every script the multilingual reports show.
# Needs root and apt (as in CI); elsewhere it is skipped with a message and those tests skip.
system:
	@if [ "$$(id -u)" = "0" ] && command -v apt-get >/dev/null; then \
	  DEBIAN_FRONTEND=noninteractive apt-get -qq update >/dev/null && \
	  DEBIAN_FRONTEND=noninteractive apt-get -qq install -y --no-install-recommends \
	    chromium fonts-noto-core fonts-noto-cjk groff-base >/dev/null && \
	  echo "system packages: chromium, Noto fonts and groff installed"; \
	else echo "system packages skipped (needs root + apt-get): report screenshot test will skip"; fi

clean:
	rm -rf $(VENV) runs .pytest_cache
