# The two commands of the quick start: `make serve` and `make test`. Both install what they need.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: serve test check lint bench browser constraints

# Every dependency, runtime and dev, is pinned in constraints.txt; the image installs with it too.
$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -c constraints.txt -e '.[dev]'
	touch $(STAMP)

# Re-resolve pyproject.toml's ranges in a fresh venv and pin what it installs.
LOCK_VENV := .venv-lock
constraints:
	rm -rf $(LOCK_VENV)
	$(PYTHON) -m venv $(LOCK_VENV)
	$(LOCK_VENV)/bin/python -m pip install -q --upgrade pip
	$(LOCK_VENV)/bin/python -m pip install -q '.[dev]'
	{ echo "# Pinned versions of every dependency, runtime and dev (make constraints rewrites it)."; \
	  echo "# Used by make's install step and by the Dockerfile: pip install -c constraints.txt"; \
	  $(LOCK_VENV)/bin/python -m pip freeze --exclude comfy-gateway; } > constraints.txt
	rm -rf $(LOCK_VENV)

serve: $(STAMP)
	$(BIN)/comfy-gateway serve $(ARGS)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# The browser tests drive Debian's chromium; installed here where apt can (they skip without it).
browser:
	@command -v chromium >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null \
		&& { apt-get install -y -q chromium >/dev/null 2>&1 \
			|| { apt-get update -q >/dev/null && apt-get install -y -q chromium >/dev/null; }; }; } \
		|| echo "no chromium: the browser tests will skip"

test: lint browser
	$(BIN)/pytest $(PYTEST_ARGS)

bench: $(STAMP)
	$(BIN)/python -m bench.calibration
