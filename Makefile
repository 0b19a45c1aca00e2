# The two commands a newcomer needs: `make run` and `make test` (see README.md).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test test-unit test-integration test-e2e lint bench bench-quick bench-report docs clean

# pip (not uv/poetry): torch 2.14.1 / torchvision 0.29.1 resolve from this machine's disk.
$(STAMP): pyproject.toml setup.py platform/echoray/data/_jpeg_region.c
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/echoray train

# One pytest session per tier, so no two Ray clusters of the tests live at once: with the
# e2e tier's `ray start --head` still up during the integration tier, Ray Train's
# placement-group cleaner in the local Ray failed ("Found multiple active Ray instances"),
# a stopped run's placement group was never removed and the next runs stalled waiting
# for CPUs. Every tier runs; the target fails if any tier failed. --durations=25: each
# tier's log ends with its 25 slowest tests, so every CI log shows where the time goes.
# The unit tier (no Ray, no servers) runs on every core (pytest-xdist): 140 -> 76 s on 2.
# The integration tier runs two tests at a time (pytest-xdist, each worker its own local
# Ray, Ray temp dir and port range: tests/conftest.py): its tests mostly wait on Ray's
# start-ups and on the faults' timeouts. 20.0 -> 14.3 min on 2 cores; three at a time took
# 15.4 and a two-node Ray's start-up timed out beside the other workers' Rays. The e2e tier
# runs two test files at a time (--dist loadfile: a file's module-scoped cluster, such as
# test_node_lost.py's nodes joined to the worker's head, serves its own tests only); each
# worker starts its own head and MLflow server on its own ports. 8.2 -> 6.8 min.
test: $(STAMP)
	rc=0; \
	$(BIN)/python -m pytest -q --durations=25 -n auto -m unit tests || rc=1; \
	$(BIN)/python -m pytest -q --durations=25 -n 2 --dist worksteal -m integration tests || rc=1; \
	$(BIN)/python -m pytest -q --durations=25 -n 2 --dist loadfile -m e2e tests || rc=1; \
	exit $$rc

test-unit: $(STAMP)
	$(BIN)/python -m pytest -q -n auto -m unit tests

test-integration: $(STAMP)
	$(BIN)/python -m pytest -q -n 2 --dist worksteal -m integration tests

test-e2e: $(STAMP)
	$(BIN)/python -m pytest -q -n 2 --dist loadfile -m e2e tests

lint: $(STAMP)
	$(BIN)/ruff check platform tests jobs benchmarks

# Every figure the README and docs/benchmarks quote, from one clean commit; the parts are
# listed in benchmarks/parts.py (docs/benchmarks/index.md): `make bench` all (~2 h 25 min on
# 2 idle cores, at af9490d), `make bench PART=name` one, `make bench-quick` each part's smoke scale
# (~14 min at 4c95b37), `make bench-report` the README's and the pages' tables from the results files.
bench: $(STAMP)
	$(BIN)/python benchmarks/bench.py $(if $(PART),--part $(PART))

bench-quick: $(STAMP)
	$(BIN)/python benchmarks/bench.py --quick $(if $(PART),--part $(PART))

bench-report: $(STAMP)
	$(BIN)/python benchmarks/report.py

# The documentation site (mkdocs.yml, docs/): the reference pages are generated from the
# code by docs/hooks.py; --strict fails on a broken link or a missing page.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

clean:
	rm -rf runs mlflow.db .pytest_cache site
