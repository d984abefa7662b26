# Two entry points: `make run` starts the proxy, `make test` runs the test suite.
# Both create .venv with Python >= 3.12 first; `run` installs what running freezeframe
# needs, `test` adds the test and development tools.
VENV := .venv
PY := $(VENV)/bin/python
RUN_STAMP := $(VENV)/.installed-run
TEST_STAMP := $(VENV)/.installed-test

.PHONY: setup run test bench lint

# The folders at the top of the checkout are the packages of freezeframe (package-dir in
# pyproject.toml). The editable install is strict: a tree of links in build/ that mypy and
# lint-imports read, where the default one is an import hook that they do not run. A file
# added to a package or removed needs the tree made again, so the install also depends on the
# list of the packages' files, rewritten here only when it changes.
EDITABLE := --config-settings editable_mode=strict
PACKAGES := proxy addons canonicalize commands evidence exchange_formats providers sandbox storage whatif
FILES := build/.files
$(shell mkdir -p build && find freezeframe cli.py $(PACKAGES) -type f ! -path '*/__pycache__/*' \
	| LC_ALL=C sort >$(FILES).new && { cmp -s $(FILES).new $(FILES) || mv $(FILES).new $(FILES); }; \
	rm -f $(FILES).new)

setup: $(RUN_STAMP)

$(PY):
	"$$(scripts/find-python)" -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

$(RUN_STAMP): pyproject.toml setup.py $(FILES) | $(PY)
	$(PY) -m pip install --quiet $(EDITABLE) -e .
	touch $@

$(TEST_STAMP): pyproject.toml setup.py $(FILES) | $(PY)
	$(PY) -m pip install --quiet $(EDITABLE) -e '.[test,dev]'
	touch $@ $(RUN_STAMP)

run: $(RUN_STAMP)
	$(VENV)/bin/freezeframe run

# Two workers (pytest-xdist), each test file on one of them (tests/conftest.py groups them):
# most of the suite's time is real proxies starting and serving, which two cores share.
# The checkout's modules compiled first: where PYTHONDONTWRITEBYTECODE is set (CI sandboxes
# set it), every proxy and CLI process the suite starts compiled them from source again.
test: $(TEST_STAMP)
	$(PY) -m compileall -q -j 0 -x '/(\.venv|node_modules|build)/' .
	$(PY) -m pytest -n 2 --dist loadgroup

bench: $(TEST_STAMP)
	$(PY) tests/benchmarks/bench_proxy.py

# lint-imports puts its current directory first on the path, where freezeframe/ (without the
# packages) would hide the link tree: it runs from build/.
lint: $(TEST_STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	cd build && ../$(VENV)/bin/lint-imports ../pyproject.toml
