# tmlbench: `make run` runs the demo benchmark and prints the leaderboard; `make test` runs the tests.
SHELL := /bin/bash
.DEFAULT_GOAL := help
# uv installed by `pip` is always reachable as `python3 -m uv`, even before a shell rehash.
UV := $(shell command -v uv 2>/dev/null || echo "python3 -m uv")
RUN := $(UV) run --frozen

.PHONY: FORCE help install system-deps browser-deps docker-engine docker-image deploy-deps uv clis run ui dashboard manifest dagster-home test test-unit lint format bench clean

# Dagster keeps its run history here for `make run` and `make ui` (data/ is git-ignored).
DAGSTER_HOME_DIR := $(CURDIR)/data/dagster
# The warehouse `make run` writes: $TMLBENCH_WAREHOUSE, else tmlbench's default file.
WAREHOUSE_FILE := $(or $(TMLBENCH_WAREHOUSE),$(CURDIR)/warehouse/tmlbench.duckdb)

help:
	@echo "make run       install, materialize the demo suite through Dagster (4 tasks x 3 baselines x 3 budgets x 5 attempts,"
	@echo "               warehouse load, dbt marts, snapshot), print the leaderboard"
	@echo "make ui        the Dagster UI on http://127.0.0.1:3000"
	@echo "make dashboard the Streamlit dashboard on http://127.0.0.1:8501 (reads the published snapshot)"
	@echo "make manifest  dbt parse: the manifest the Dagster definitions load"
	@echo "make test      install, lint, check the Dagster definitions, run the whole test suite (4 workers)"
	@echo "make test-unit the fast inner loop (about a minute): the tests that need no dbt build, sandbox,"
	@echo "               server, Docker, browser or agent CLI (tests/README.md)"
	@echo "make docker-image  start the Docker engine if needed and build the docker sandbox's image"
	@echo "make deploy-deps   docker-compose and the Docker deployment's images (orchestration/deployments/docker)"
	@echo "make clis   install the pinned CLI of every command agent (tmlbench agents install --all; cached)"
	@echo "make bench  run the benchmark scripts in benchmarks/"

install: system-deps .venv/.installed

# The sandbox's system parts: bubblewrap (the default backend), e2fsprogs (mkfs.ext4: each
# attempt's workspace is a filesystem of its own) and libseccomp2 (the bwrap seccomp filter).
# Installed when we can (root on Debian), else we say how.
system-deps:
	@{ command -v bwrap && PATH="$$PATH:/usr/sbin:/sbin" command -v mkfs.ext4 \
	   && /sbin/ldconfig -p | grep -q 'libseccomp\.so\.2'; } >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing bubblewrap, e2fsprogs and libseccomp2 (the sandbox)"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap e2fsprogs libseccomp2 >/dev/null; \
	  else \
	    echo "the sandbox needs: 'sudo apt-get install bubblewrap e2fsprogs libseccomp2' (Debian/Ubuntu)"; exit 1; \
	  fi; }

# chromium drives the dashboard's browser test (never Playwright's own browser download);
# only `make test` needs it.
browser-deps:
	@test -x /usr/bin/chromium || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing chromium (the dashboard's browser test drives /usr/bin/chromium)"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	  else \
	    echo "chromium is missing: install it with 'sudo apt-get install chromium' (Debian/Ubuntu)"; exit 1; \
	  fi; }

# The docker sandbox backend: Debian's engine (docker.io) and debootstrap, which builds the
# image's base without Docker Hub. dockerd is started in the background when not running.
DOCKERD_LOG := /var/log/tmlbench-dockerd.log
docker-engine:
	@{ command -v dockerd && command -v debootstrap && command -v docker; } >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing docker.io and debootstrap (the docker sandbox backend)"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io debootstrap >/dev/null; \
	  else \
	    echo "the docker backend needs Docker and debootstrap: 'sudo apt-get install docker.io debootstrap'"; exit 1; \
	  fi; }
	@docker info >/dev/null 2>&1 || { \
	  [ "$$(id -u)" = 0 ] || { echo "the Docker engine is not running: start it (e.g. 'sudo systemctl start docker')"; exit 1; }; \
	  echo "starting dockerd in the background (log: $(DOCKERD_LOG))"; \
	  setsid nohup dockerd >>$(DOCKERD_LOG) 2>&1 < /dev/null & \
	  for i in $$(seq 1 60); do docker info >/dev/null 2>&1 && exit 0; sleep 1; done; \
	  echo "dockerd did not come up within 60 s:"; tail -n 20 $(DOCKERD_LOG); exit 1; }

# Cached: a second run with nothing changed takes well under a second (see build.sh).
docker-image: docker-engine
	runner/sandbox/image/build.sh

# The Docker deployment (orchestration/deployments/docker/): Debian's docker-compose and its
# images (the sandbox's base and agent image, Postgres 15, the user code), built without Docker
# Hub. Cached: with nothing changed, a few seconds (see build.sh).
deploy-deps: docker-engine
	@{ command -v docker-compose || docker compose version; } >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing docker-compose (the Docker deployment)"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker-compose >/dev/null; \
	  else \
	    echo "the Docker deployment needs docker-compose: 'sudo apt-get install docker-compose'"; exit 1; \
	  fi; }
	orchestration/deployments/docker/build.sh

# The agent CLIs the shipped command agents pin (npm and PyPI), into ~/.cache/tmlbench/clis:
# a version installed once is reused by every clone.
clis: install
	$(RUN) tmlbench agents install --all

uv:
	@$(UV) --version >/dev/null 2>&1 || { echo "installing uv"; python3 -m pip install --quiet uv; }

# Bytecode is compiled here: the sandbox mounts this venv read-only, so an agent's Python
# would otherwise recompile pandas and scikit-learn on every import (seconds per attempt).
.venv/.installed: pyproject.toml uv.lock | uv
	$(UV) sync --frozen --compile-bytecode
	@touch $@

run ui dagster-home: export DAGSTER_HOME := $(DAGSTER_HOME_DIR)

run: install manifest dagster-home
	$(RUN) python -m orchestration.materialize --suite demo
	$(RUN) tmlbench leaderboard --suite demo
	@echo ""
	@echo "warehouse: $(WAREHOUSE_FILE) (SQL: uv run tmlbench sql -f warehouse/queries/leaderboard.sql)"
	@echo "Dagster UI: make ui, then open http://127.0.0.1:3000 (runs, asset metadata, checks)"
	@echo "dashboard: make dashboard, then open http://127.0.0.1:8501 (reads the published snapshot of the marts)"

ui: install manifest dagster-home
	$(RUN) dagster dev -m orchestration.definitions -h 127.0.0.1 -p 3000

dashboard: install
	$(RUN) streamlit run app/streamlit_app.py --server.address 127.0.0.1 --server.port 8501 --server.headless true

# The dbt manifest is built here, never when the definitions are imported; and only when a file
# dbt parses is newer than it (a `make run` with nothing new should not wait seconds for dbt).
MANIFEST := dbt_project/target/manifest.json
DBT_SOURCES := $(shell find dbt_project/models dbt_project/macros dbt_project/tests -type f 2>/dev/null) \
	$(wildcard dbt_project/*.yml)
manifest: install $(MANIFEST)

# dbt re-parses the whole project when the warehouse path is not the one its parse cache was
# made with (the path is a dbt var, and dbt hashes the vars by value): the manifest is made
# again for the warehouse `make run`/`make ui` use, so their dbt builds parse only what changed.
# A `tmlbench warehouse build` into dbt_project/target writes the stamp too (warehouse/dbt.py).
WAREHOUSE_STAMP := dbt_project/target/.warehouse
$(WAREHOUSE_STAMP): FORCE
	@mkdir -p $(@D)
	@[ "$$(cat $@ 2>/dev/null)" = "$(abspath $(WAREHOUSE_FILE))" ] || echo "$(abspath $(WAREHOUSE_FILE))" > $@

$(MANIFEST): $(DBT_SOURCES) .venv/.installed $(WAREHOUSE_STAMP)
	$(RUN) python -m warehouse.dbt parse --quiet
	@touch $@

FORCE:

dagster-home:
	@mkdir -p $(DAGSTER_HOME)
	@cp orchestration/dagster.yaml $(DAGSTER_HOME)/dagster.yaml

# Four pytest-xdist workers on 2 cores: most of the suite's time is tests waiting (on sandboxed
# attempts' budgets, servers, dbt subprocesses), so two workers left the cores 60 % idle; loadgroup
# keeps each xdist_group's tests on one worker (tests/README.md, "Running in parallel", has the
# measurements). Another count: make test PYTEST_WORKERS="-n 2 --dist loadgroup".
PYTEST_WORKERS := -n 4 --dist loadgroup

test: install browser-deps docker-image deploy-deps clis lint manifest
	$(RUN) dg check defs
	$(RUN) pytest $(PYTEST_WORKERS)

# The inner loop: what the markers sandbox, integration and slow leave (tests/README.md says how
# to mark a new test). No installs beyond the venv: it needs no Docker, browser or agent CLI.
test-unit: install
	$(RUN) pytest $(PYTEST_WORKERS) -m "not (sandbox or integration or slow)"

# mypy --strict on every module of the packages [tool.mypy] in pyproject.toml lists.
lint: install
	$(RUN) ruff check .
	$(RUN) ruff format --check .
	$(RUN) mypy

format: install
	$(RUN) ruff check --fix .
	$(RUN) ruff format .

bench: install
	$(RUN) python benchmarks/host_speed.py  # first: the hour the rest ran in
	$(RUN) python benchmarks/sandbox_overhead.py
	$(RUN) python benchmarks/deadline.py
	$(RUN) python benchmarks/grading.py
	$(RUN) python benchmarks/baseline_quality.py
	$(RUN) python benchmarks/warehouse_load.py
	$(RUN) python benchmarks/dbt_build.py
	$(RUN) python benchmarks/dbt_resource.py
	$(RUN) python benchmarks/dashboard.py
	$(RUN) python benchmarks/gateway_overhead.py
	$(RUN) python benchmarks/cli_startup.py
	$(RUN) python benchmarks/command_latency.py
	$(RUN) python benchmarks/workspace_fs.py
	$(RUN) python benchmarks/frame_flood.py
	$(RUN) python benchmarks/seccomp_overhead.py
	$(RUN) python benchmarks/fingerprint.py
	$(RUN) python benchmarks/duplicate_submissions.py
	$(RUN) python benchmarks/docker_deployment.py
	$(RUN) python benchmarks/ui_loop.py
	$(RUN) python benchmarks/ui_idle.py

clean:
	rm -rf .venv data runs .pytest_cache .ruff_cache
