# delta-commit-owner: `make run` starts the service on the embedded default, `make test` runs the suite.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# make run's database, address and port: COMMIT_OWNER_DATABASE_URL / _HOST / _PORT from the environment, or
# make run DB_URL=... HOST=... PORT=...
DB_URL ?= $(or $(COMMIT_OWNER_DATABASE_URL),sqlite+aiosqlite:///./commit-owner.db)
HOST   ?= $(or $(COMMIT_OWNER_HOST),127.0.0.1)
PORT   ?= $(or $(COMMIT_OWNER_PORT),8080)

.DEFAULT_GOAL := help
.PHONY: help run test lint install install-test install-emulators install-sail install-uc-client install-daft install-ha migrate clean config-docs test-system-deps chaos chaos-ha bench bench-smoke

help: ## Show this help
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-14s %s\n", $$1, $$2}'

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

.stamp-install: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e .
	@touch $@

.stamp-install-test: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[test,spark,delta-spark]'
	@touch $@

# Sail (a Spark Connect server) and the PySpark client that drives it: outside clients of the Unity Catalog
# facade, in their own virtualenv so their pins never touch the service's. A failed install does not stop
# `make test`: it is printed loudly and written to $(SAIL_VENV)/INSTALL_FAILED, the Sail tests skip with it,
# and the next make tries again.
SAIL_VENV ?= .venv-sail
SAIL_PINS := 'pysail>=0.7,<0.8' 'pyspark-client==4.2.0'

.stamp-sail:
	rm -rf $(SAIL_VENV)
	$(PYTHON) -m venv $(SAIL_VENV)
	@if $(SAIL_VENV)/bin/pip install --quiet $(SAIL_PINS) > $(SAIL_VENV)/install.log 2>&1; then \
	  echo "$(SAIL_VENV): $$($(SAIL_VENV)/bin/sail --version)"; touch $@; \
	else \
	  tail -n 20 $(SAIL_VENV)/install.log > $(SAIL_VENV)/INSTALL_FAILED; \
	  echo "!!! could not install $(SAIL_PINS) into $(SAIL_VENV); the Sail tests will SKIP (retried next make):"; \
	  cat $(SAIL_VENV)/INSTALL_FAILED; \
	fi

install: .stamp-install ## Create .venv and install the service

install-test: .stamp-install-test ## Install the service with its test dependencies

install-sail: .stamp-sail ## Create .venv-sail with Sail and the PySpark client (the Unity Catalog tests' judge)

# unitycatalog-client pins aiohttp and pydantic below the service's versions: it gets its own virtualenv,
# driven by tests/unity/test_uc_client.py. A failed install is reported and those tests skip with the reason.
UC_VENV ?= .venv-uc
UC_CLIENT ?= unitycatalog-client>=0.7,<0.8

$(UC_VENV)/.stamp:
	@$(PYTHON) -m venv $(UC_VENV) && $(UC_VENV)/bin/pip install --quiet '$(UC_CLIENT)' && touch $@ \
	  || echo "!!! could not install $(UC_CLIENT) into $(UC_VENV): tests/unity/test_uc_client.py will skip !!!"

install-uc-client: $(UC_VENV)/.stamp ## Create .venv-uc with unitycatalog-client (its pins clash with the service's)

# Daft 0.7 wants pyarrow < 26 (the test extra has 26): its own virtualenv, driven by tests/unity/test_daft.py.
# daft[unity] imports tenacity, and its writer pyiceberg (the iceberg extra), without depending on them. A failed
# install is reported and those tests skip.
DAFT_VENV ?= .venv-daft
DAFT_PINS := 'daft[unity,deltalake,iceberg]>=0.7,<0.8' 'tenacity>=8'

$(DAFT_VENV)/.stamp:
	@$(PYTHON) -m venv $(DAFT_VENV) && $(DAFT_VENV)/bin/pip install --quiet $(DAFT_PINS) && touch $@ \
	  || echo "!!! could not install $(DAFT_PINS) into $(DAFT_VENV): tests/unity/test_daft.py will skip !!!"

install-daft: $(DAFT_VENV)/.stamp ## Create .venv-daft with Daft (its pyarrow pin clashes with the test extra's)

# The Patroni store for tests/reliability/test_patroni.py and `scripts/chaos --store patroni`: Debian's etcd
# (apt, root or sudo, only when absent) and Patroni in its own virtualenv built from Debian's /usr/bin/python3:
# Patroni runs as the `postgres` OS user, which can execute neither root's pyenv Python nor a venv made from
# it. A failed install is printed loudly and written to $(HA_VENV)/INSTALL_FAILED; the Patroni test skips
# with it, and the next make tries again.
HA_VENV ?= .venv-patroni
HA_PYTHON ?= /usr/bin/python3
HA_PINS := 'patroni[etcd3,psycopg3]==4.1.5'

.stamp-ha:
	@rm -rf $(HA_VENV); mkdir -p $(HA_VENV); : > $(HA_VENV)/install.log; \
	SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); APT="$$SUDO env DEBIAN_FRONTEND=noninteractive apt-get"; \
	need=""; [ -x /usr/bin/etcd ] || need="etcd-server"; \
	$(HA_PYTHON) -c 'import venv, ensurepip' 2>/dev/null || need="$$need python3-venv"; \
	if [ -n "$$need" ]; then echo "apt-get install$$need"; \
	  { $$APT update -qq && $$APT install -y -qq --no-install-recommends $$need; } >> $(HA_VENV)/install.log 2>&1; fi; \
	if [ -x /usr/bin/etcd ] && $(HA_PYTHON) -m venv $(HA_VENV) >> $(HA_VENV)/install.log 2>&1 \
	    && $(HA_VENV)/bin/pip install --quiet $(HA_PINS) >> $(HA_VENV)/install.log 2>&1; then \
	  chmod -R a+rX $(HA_VENV); \
	  echo "$(HA_VENV): patroni $$($(HA_VENV)/bin/patroni --version | cut -d' ' -f2); $$(/usr/bin/etcd --version | head -1)"; \
	  touch $@; \
	else \
	  tail -n 20 $(HA_VENV)/install.log > $(HA_VENV)/INSTALL_FAILED; \
	  echo "!!! could not install etcd-server (apt) and $(HA_PINS) into $(HA_VENV); tests/reliability/test_patroni.py will SKIP (retried next make):"; \
	  cat $(HA_VENV)/INSTALL_FAILED; \
	fi

# azurite, Microsoft's Azure Storage emulator, from npm into .tools/azurite (the GCS emulator comes with the test
# extra). A failed install is printed loudly; the Azure suites skip naming this step, and the next make tries again.
AZURITE_PIN ?= azurite@3.37.0

# The target is the installed binary itself (not a stamp), so a removed .tools/ is installed again.
.tools/azurite/node_modules/.bin/azurite-blob:
	@mkdir -p .tools/azurite; \
	if npm install --prefix .tools/azurite --silent --no-audit --no-fund $(AZURITE_PIN) > .tools/azurite-install.log 2>&1 \
	    && .tools/azurite/node_modules/.bin/azurite-blob --version > /dev/null; then \
	  echo "azurite: $$(.tools/azurite/node_modules/.bin/azurite-blob --version)"; \
	else \
	  echo "!!! could not install $(AZURITE_PIN) with npm; the Azure suites will SKIP (retried next make):"; \
	  tail -n 20 .tools/azurite-install.log; \
	fi

install-emulators: .tools/azurite/node_modules/.bin/azurite-blob ## npm install azurite into .tools/ (the Azure suites' emulator)

install-ha: .stamp-ha ## etcd (apt) and .venv-patroni (Patroni 4.1) for the Patroni failover test and chaos-ha

migrate: install ## Create or upgrade the database schema
	$(BIN)/commit-owner migrate --database-url '$(DB_URL)'

run: migrate ## Start the service on SQLite + local files at 127.0.0.1:8080
	mkdir -p warehouse
	$(BIN)/commit-owner serve --database-url '$(DB_URL)' --host $(HOST) --port $(PORT)

lint: install-test ## ruff, mypy and lint-imports (the layers, no import circles; configured in pyproject.toml; part of make test)
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/lint-imports --no-cache

test: install-test install-emulators install-sail install-uc-client install-daft install-ha lint ## Install test dependencies, lint, and run the whole suite
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

chaos-ha: install-test install-ha ## The chaos run on a Patroni cluster (etcd + 3 nodes), store failovers among its faults
	$(BIN)/python scripts/chaos --store patroni --duration 600 --json chaos-ha.json

bench-smoke: install-test ## Seconds-long benchmark run on PostgreSQL (CI keeps the benchmark from rotting)
	$(BIN)/commit-owner bench --smoke --json bench-smoke.json

bench: install-test ## Full benchmark (about 5 minutes): docs/bench/bench.{json,png,md} (docs/benchmarks.md)
	mkdir -p docs/bench
	$(BIN)/commit-owner bench --json docs/bench/bench.json --png docs/bench/bench.png --markdown docs/bench/bench.md

clean: ## Remove the virtualenv, the embedded database and caches
	rm -rf $(VENV) $(SAIL_VENV) $(UC_VENV) $(DAFT_VENV) $(HA_VENV) .tools .stamp-* commit-owner.db* .pytest_cache bench-smoke.json
