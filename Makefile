# memframe: `make run` opens the Memory frame; `make test` passes the whole suite.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
SUM    := $(shell cat pyproject.toml | cksum | cut -d' ' -f1)
# Two stamps: `make run` installs only what the frame needs (a first paint in seconds, not a minute of
# pytest, hypothesis, schemathesis, ruff and mypy); `make test` and the tools add the test extras.
RUN_STAMP  := $(VENV)/.installed-run-$(SUM)
TEST_STAMP := $(VENV)/.installed-test-$(SUM)
# compat: a plain path in a .pth, so no editable finder is imported at every start-up (~25 ms);
# setuptools calls that mode transitional, so a setuptools without it gets the default mode.
install = $(BIN)/python -m pip install --quiet -e '$(1)' --config-settings editable_mode=compat 2>/dev/null \
		|| $(BIN)/python -m pip install --quiet -e '$(1)'

.PHONY: run test check lint format bench soak screenshots clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(RUN_STAMP): pyproject.toml | $(BIN)/python
	$(call install,.)
	rm -f $(VENV)/.installed-run-*
	touch $(RUN_STAMP)

# The test extras include everything `.` installs, so this stamp stands for both.
$(TEST_STAMP): pyproject.toml | $(BIN)/python
	$(call install,.[test])
	rm -f $(VENV)/.installed-*
	touch $(TEST_STAMP) $(RUN_STAMP)

run: $(RUN_STAMP)
	$(BIN)/memframe

test: $(TEST_STAMP)
	$(BIN)/python -m pytest -q

lint: $(TEST_STAMP)
	$(BIN)/ruff check memframe tests bench
	$(BIN)/ruff format --check memframe tests bench

check: lint
	$(BIN)/mypy
	$(BIN)/python -m pytest -q

format: $(TEST_STAMP)
	$(BIN)/ruff format memframe tests bench
	$(BIN)/ruff check --fix memframe tests bench

screenshots: $(TEST_STAMP)
	$(BIN)/python -m tests.tui.screenshots screenshots

bench: $(TEST_STAMP)
	$(BIN)/python -m bench

# The reliability families at a larger size (see RELIABILITY.md).
soak: $(TEST_STAMP)
	MEMFRAME_SOAK=1 MEMFRAME_RELIABILITY_REPORT=soak-report.jsonl \
		$(BIN)/python -m pytest -q -m "crash or fault or race or fuzz or access"

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
