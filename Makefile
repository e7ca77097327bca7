# delta-commit-owner: `make run` starts the service on the embedded default, `make test` runs the suite.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
DB_URL ?= sqlite+aiosqlite:///./commit-owner.db
HOST   ?= 127.0.0.1
PORT   ?= 8080

.DEFAULT_GOAL := help
.PHONY: help run test install install-test migrate clean config-docs test-system-deps chaos bench bench-smoke

help: ## Show this help
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-14s %s\n", $$1, $$2}'

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

.stamp-install: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e .
	@touch $@

.stamp-install-test: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[test,spark]'
	@touch $@

install: .stamp-install ## Create .venv and install the service

install-test: .stamp-install-test ## Install the service with its test dependencies

migrate: install ## Create or upgrade the database schema
	$(BIN)/commit-owner migrate --database-url '$(DB_URL)'

run: migrate ## Start the service on SQLite + local files at 127.0.0.1:8080
	mkdir -p warehouse
	$(BIN)/commit-owner serve --database-url '$(DB_URL)' --host $(HOST) --port $(PORT)

test: install-test ## Install test dependencies and run the whole suite
	$(BIN)/python -m pytest -q $(PYTEST_ARGS)

# The status-page test drives Debian's Chromium headless; install it on a fresh machine (needs root or sudo).
test-system-deps: ## Install the system packages the tests need (chromium), unless present
	@if [ -x /usr/bin/chromium ]; then echo "chromium: present"; else \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends chromium; fi

config-docs: install ## Regenerate docs/configuration.md from the settings declaration
	$(BIN)/commit-owner config docs --output docs/configuration.md

chaos: install-test ## 10-minute chaos run (faults + checker), figures in chaos.json (docs/reliability.md)
	$(BIN)/python scripts/chaos --duration 600 --json chaos.json

bench-smoke: install-test ## Seconds-long benchmark run on PostgreSQL (CI keeps the benchmark from rotting)
	$(BIN)/commit-owner bench --smoke --json bench-smoke.json

bench: install-test ## Full benchmark (about 5 minutes): docs/bench/bench.{json,png,md} (docs/benchmarks.md)
	mkdir -p docs/bench
	$(BIN)/commit-owner bench --json docs/bench/bench.json --png docs/bench/bench.png --markdown docs/bench/bench.md

clean: ## Remove the virtualenv, the embedded database and caches
	rm -rf $(VENV) .stamp-* commit-owner.db* .pytest_cache bench-smoke.json
