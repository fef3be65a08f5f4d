# The two commands of the quick start: `make serve` and `make test`. Both install what they need.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: serve test check lint bench browser

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

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
