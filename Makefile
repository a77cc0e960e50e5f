# The two commands a newcomer runs: `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: demo test test-oldest lint typecheck check bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@

demo: $(VENV)/.installed
	$(BIN)/agentlens demo

test: $(VENV)/.installed
	$(BIN)/python -m pytest -q

# The checks' tests again under another interpreter, in a venv of its own: CI runs them under
# Debian's Python 3.11.2, whose regular-expression engine matches some expressions otherwise
# than later 3.11 releases do (tests/eval/test_regex_portability.py).
OLDEST_PYTHON ?= /usr/bin/python3.11
OLDEST_VENV   ?= .venv-oldest

$(OLDEST_VENV)/.installed: pyproject.toml
	$(OLDEST_PYTHON) -m venv $(OLDEST_VENV)
	$(OLDEST_VENV)/bin/python -m pip install --quiet -e '.[dev]'
	touch $@

test-oldest: $(OLDEST_VENV)/.installed
	$(OLDEST_VENV)/bin/python -m pytest -q tests/eval tests/model

lint: $(VENV)/.installed
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks

typecheck: $(VENV)/.installed
	$(BIN)/mypy

check: test lint typecheck

clean:
	rm -rf $(VENV) $(OLDEST_VENV) .pytest_cache .mypy_cache .ruff_cache
