# memframe: `make run` opens the Memory frame; `make test` passes the whole suite.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)

.PHONY: run test check lint format bench soak mutate screenshots clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	# compat: a plain path in a .pth, so no editable finder is imported at every start-up (~25 ms);
	# setuptools calls that mode transitional, so a setuptools without it gets the default mode.
	$(BIN)/python -m pip install --quiet -e '.[test]' --config-settings editable_mode=compat 2>/dev/null \
		|| $(BIN)/python -m pip install --quiet -e '.[test]'
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/memframe

test: $(STAMP)
	$(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/ruff check memframe tests bench
	$(BIN)/ruff format --check memframe tests bench

check: lint
	$(BIN)/mypy
	$(BIN)/python -m pytest -q

format: $(STAMP)
	$(BIN)/ruff format memframe tests bench
	$(BIN)/ruff check --fix memframe tests bench

screenshots: $(STAMP)
	$(BIN)/python -m memframe.tui.screenshots screenshots

bench: $(STAMP)
	$(BIN)/python -m bench

# The reliability families at a larger size (see RELIABILITY.md).
soak: $(STAMP)
	MEMFRAME_SOAK=1 MEMFRAME_RELIABILITY_REPORT=soak-report.jsonl \
		$(BIN)/python -m pytest -q -m "crash or fault or race or fuzz or access"

# Mutation testing of core/, the fence, capture, policy and files (tools/mutate.py; not part of
# `make test`): writes mutation/report.md. MODULES=memframe/core/edits.py runs a subset.
mutate: $(STAMP)
	$(BIN)/python tools/mutate.py $(MODULES) --jobs $(or $(JOBS),2)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
