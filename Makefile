# Thin aliases. The simulator builds with `--cfg madsim` in its own target dir, so the
# production build (real tokio) and the simulated build never share artefacts.
SIM_ENV := RUSTFLAGS="--cfg madsim" CARGO_TARGET_DIR=target/sim
SIM := $(SIM_ENV) cargo run --release -q -p toolop-sim --
DEFAULT_SET := scenarios/smoke.toml scenarios/mcp_faults.toml scenarios/mcp_load.toml scenarios/aip151_faults.toml scenarios/mcp_ext_faults.toml scenarios/mcp_retire.toml scenarios/mcp_sqlite.toml
SCENARIO ?= scenarios/smoke.toml
SEED ?= 42
SERIES ?= 10000
JOBS ?= 2

.PHONY: gate gate-ci canary run replay shrink bench ledger-bench mutants mutants-ci tune test build peers peer-ts peer-python peers-rmcp test-peers-rmcp

PEERS_VENV := target/peers-venv

# The release gate: 10,000 seeded series of the default set, every invariant, every gate.
gate:
	$(SIM) gate --scenario $(DEFAULT_SET) --series $(SERIES) --jobs $(JOBS)

# The reduced sweep CI runs.
gate-ci:
	$(SIM) gate --scenario $(DEFAULT_SET) --series 500 --jobs $(JOBS) --run gate-ci

# Must exit 1: a deliberately wrong executor configuration.
canary:
	$(SIM) gate --scenario scenarios/canary_must_fail.toml --series 200 --jobs $(JOBS) --run canary

run:
	$(SIM) run --scenario $(SCENARIO) --seed $(SEED)

replay:
	$(SIM) replay --scenario $(SCENARIO) --seed $(SEED)

shrink:
	$(SIM) shrink --scenario $(SCENARIO) --seed $(SEED)

# Every planted anti-pattern must be caught within 2,000 series (exit 1 if one survives).
mutants:
	$(SIM) mutants --series 2000 --jobs $(JOBS)

# The reduced mutation table CI runs.
mutants-ci:
	$(SIM) mutants --series 600 --jobs $(JOBS)

TUNE_SERIES ?= 200
# Tune poll settings: the default grid on the default fault scenario, the same seeds at every point.
tune:
	$(SIM) tune --scenario scenarios/mcp_faults.toml --grid scenarios/grids/default.toml --series $(TUNE_SERIES) --jobs $(JOBS)

bench:
	$(SIM) bench --scenario $(DEFAULT_SET) --series $(SERIES) --jobs $(JOBS)

# Ledger throughput (commits/s, acceptance transactions/s) on SQLite files, in memory, and the
# in-memory ledger. A benchmark on real files and real time, never a test.
LEDGER_RECORDS ?= 2000
ledger-bench:
	cargo run --release -q --example ledger_bench -- --records $(LEDGER_RECORDS)

build:
	cargo build --release
	$(SIM_ENV) cargo build --release -p toolop-sim

# Interop peers: the official SDK servers the live tests start (npm and PyPI, from the lock files).
peers: target/peers-ts.stamp target/peers-python.stamp

target/peers-ts.stamp: tests/peers/ts/package.json tests/peers/ts/package-lock.json
	cd tests/peers/ts && npm ci --no-audit --no-fund --loglevel=error
	mkdir -p target && touch $@

target/peers-python.stamp: tests/peers/python/requirements.txt
	python3 -m venv $(PEERS_VENV)
	$(PEERS_VENV)/bin/pip install --quiet --disable-pip-version-check -r tests/peers/python/requirements.txt
	mkdir -p target && touch $@

# The README example's server: the TypeScript peer on port 3000.
peer-ts: target/peers-ts.stamp
	node tests/peers/ts/server.mjs --port 3000

peer-python: target/peers-python.stamp
	$(PEERS_VENV)/bin/python tests/peers/python/server.py --port 3001

test: peers
	cargo test -p toolop
	cargo test -p toolop-fault-proxy
	# The ledger suite again as the simulator builds it: SQLite in memory under --cfg madsim.
	$(SIM_ENV) cargo test --release -q -p toolop --lib ledger::
	$(SIM_ENV) cargo test --release -p toolop-sim

# The rmcp interop peer (tests/peers/rmcp): its own workspace and lock file, its own target dir.
# Binary: target/peers/rmcp/debug/toolop-rmcp-peer (see tests/peers/rmcp/README.md); an
# unoptimised build (half the CPU of --release); PEERS_RMCP_FLAGS=--release for target/.../release.
PEERS_RMCP_FLAGS ?=
PEERS_RMCP := CARGO_TARGET_DIR=target/peers/rmcp cargo
PEERS_RMCP_MANIFEST := --locked $(PEERS_RMCP_FLAGS) --manifest-path tests/peers/rmcp/Cargo.toml

# --all-targets: the binary and the tests are built with one feature set (the test-only
# dependencies change tokio's and hyper's features), so test-peers-rmcp rebuilds nothing.
peers-rmcp:
	$(PEERS_RMCP) build --all-targets $(PEERS_RMCP_MANIFEST)

# The peer's own tests: the rmcp transcript replayed against it, its record, stdio and HTTP.
test-peers-rmcp:
	$(PEERS_RMCP) test $(PEERS_RMCP_MANIFEST)
