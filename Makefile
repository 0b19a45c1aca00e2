# The two commands a newcomer needs: `make run` and `make test` (see README.md).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test test-unit test-integration test-e2e lint bench clean

# pip (not uv/poetry): torch 2.14.1 / torchvision 0.29.1 resolve from this machine's disk.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/echoray train

test: $(STAMP)
	$(BIN)/python -m pytest -q tests

test-unit: $(STAMP)
	$(BIN)/python -m pytest -q -m unit tests

test-integration: $(STAMP)
	$(BIN)/python -m pytest -q -m integration tests

test-e2e: $(STAMP)
	$(BIN)/python -m pytest -q -m e2e tests

lint: $(STAMP)
	$(BIN)/ruff check platform tests jobs benchmarks

bench: $(STAMP)
	$(BIN)/python benchmarks/startup.py
	$(BIN)/python benchmarks/echo.py
	$(BIN)/python benchmarks/batch_augmentation.py

clean:
	rm -rf runs mlflow.db .pytest_cache
