# tmlbench: `make run` runs the demo benchmark and prints the leaderboard; `make test` runs the tests.
SHELL := /bin/bash
.DEFAULT_GOAL := help
# uv installed by `pip` is always reachable as `python3 -m uv`, even before a shell rehash.
UV := $(shell command -v uv 2>/dev/null || echo "python3 -m uv")
RUN := $(UV) run --frozen

.PHONY: help install system-deps uv run test lint format bench clean

help:
	@echo "make run    install, run the demo suite (4 tasks x 3 baselines x 3 budgets x 5 attempts), print the leaderboard, build the warehouse marts"
	@echo "make test   install, then lint and run the whole test suite"
	@echo "make bench  run the benchmark scripts in benchmarks/"

install: system-deps .venv/.installed

# bubblewrap is the default sandbox; install it when we can (root on Debian), else say how.
system-deps:
	@command -v bwrap >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing bubblewrap (the default sandbox)"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null; \
	  else \
	    echo "bubblewrap is missing: install it with 'sudo apt-get install bubblewrap' (Debian/Ubuntu)"; exit 1; \
	  fi; }

uv:
	@$(UV) --version >/dev/null 2>&1 || { echo "installing uv"; python3 -m pip install --quiet uv; }

.venv/.installed: pyproject.toml uv.lock | uv
	$(UV) sync --frozen
	@touch $@

run: install
	$(RUN) tmlbench bench --suite demo
	$(RUN) tmlbench warehouse build --runs-dir runs/demo

test: install lint
	$(RUN) pytest

lint: install
	$(RUN) ruff check .
	$(RUN) ruff format --check .

format: install
	$(RUN) ruff check --fix .
	$(RUN) ruff format .

bench: install
	$(RUN) python benchmarks/sandbox_overhead.py
	$(RUN) python benchmarks/deadline.py
	$(RUN) python benchmarks/grading.py
	$(RUN) python benchmarks/baseline_quality.py
	$(RUN) python benchmarks/warehouse_load.py
	$(RUN) python benchmarks/dbt_build.py

clean:
	rm -rf .venv data runs .pytest_cache .ruff_cache
