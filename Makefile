# Two commands do all the set-up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
TORCH_SPEC ?= torch==2.13.0
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-dev

.PHONY: install demo test test-python stress lint bench clean wheel

$(PY):
	$(PYTHON) -m venv $(VENV)

# torch is pinned in the same pip command: unpinned, pip would pull a multi-GB CUDA build.
$(STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install -q "$(TORCH_SPEC)" -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

# The demo runs as the terminal's foreground job, so that Ctrl+C ends it without make
# reporting an interrupted recipe.
demo: install
	PYTHONUNBUFFERED=1 $(PY) scripts/foreground.py $(PY) examples/demo.py

# Every suite runs, even after one failed; the summary names each failed suite and the exit
# status is non-zero if any did.
SUITES := test-python test-extension test-vscode
test: install
	@failed=""; started=$$(date +%s); \
	for suite in $(SUITES); do \
	  suite_start=$$(date +%s); \
	  if $(MAKE) --no-print-directory $$suite; then status=passed; else status=FAILED; failed="$$failed $$suite"; fi; \
	  echo "[test] $$suite $$status in $$(( $$(date +%s) - suite_start )) s"; \
	done; \
	echo "[test] all suites took $$(( $$(date +%s) - started )) s"; \
	if [ -n "$$failed" ]; then echo "[test] failed suites:$$failed"; exit 1; fi; \
	echo "[test] every suite passed"

# A wheel of this version (dist/onthefly_ai-*.whl) with the dashboard inside, for
# `pip install "torch==2.13.0" dist/onthefly_ai-*.whl` in another project.
wheel: install
	rm -rf build dist/*.whl
	$(PY) -m pip wheel -q --no-deps -w dist .
	@ls dist/*.whl

test-python: install
	$(PY) -m pytest --benchmark-skip -q -m "not stress"

# The long hardening runs: 10,000 fuzzed frames, 4 clients for 10 minutes (ONTHEFLY_LOAD_SECONDS);
# and 52 random pause points resumed in new processes.
stress: install
	ONTHEFLY_RECORD_FIGURES=1 $(PY) -m pytest --benchmark-skip -q -s -m stress tests/hardening
	ONTHEFLY_RECORD_FIGURES=1 $(PY) -m pytest --benchmark-skip -q -s tests/hardening/test_reconnect.py \
	  tests/hardening/test_connections.py
	$(PY) -m pytest --benchmark-skip -q -m stress tests/sessions

lint: install
	$(VENV)/bin/ruff check onthefly tests benchmarks examples
	$(VENV)/bin/ruff format --check onthefly tests benchmarks examples
	$(VENV)/bin/mypy

# The dashboard (extension/): its Node packages and Chromium. Defined before `bench`, the first
# rule that names them: make expands a rule's prerequisites as it reads the rule.
CHROMIUM := /usr/bin/chromium
NPM_STAMP := extension/node_modules/.installed

$(CHROMIUM):
	apt-get install -y -q chromium || (apt-get update -q && apt-get install -y -q chromium)

$(NPM_STAMP): extension/package-lock.json
	cd extension && npm ci --no-audit --no-fund
	touch $(NPM_STAMP)

# A missed target is reported, and every figure still goes to benchmarks/RESULTS.md.
bench: install $(NPM_STAMP) | $(CHROMIUM)
	mkdir -p .benchmarks
	$(PY) -m pytest benchmarks --benchmark-only -q --benchmark-json=.benchmarks/latest.json \
	  || echo "[bench] a benchmark missed its target: see the failures above"
	cd extension && ONTHEFLY_PERF_TARGETS=1 ONTHEFLY_STREAM_SECONDS=60 npm run test:perf \
	  || echo "[bench] a dashboard figure missed its target: see extension/test-results/perf.json"
	$(PY) benchmarks/report.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .benchmarks

# The dashboard's unit tests, then real Chromium against real training processes.
.PHONY: test-extension bench-extension test-vscode
test-extension: install $(NPM_STAMP) | $(CHROMIUM)
	cd extension && npx tsc -p . && npm test && npm run test:e2e

# The 60 s streaming measurement (figures in extension/test-results/perf.json).
bench-extension: install $(NPM_STAMP) | $(CHROMIUM)
	cd extension && ONTHEFLY_PERF_TARGETS=1 ONTHEFLY_STREAM_SECONDS=60 npm run test:perf

# The packaged extension in a real VS Code host (code-server, installed once into
# extension/.vscode-test/: about 2 minutes and 800 MB), against a real training process.
test-vscode: install $(NPM_STAMP) | $(CHROMIUM)
	cd extension && ./scripts/test-vscode.sh
