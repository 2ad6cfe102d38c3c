# Thin aliases. The simulator builds with `--cfg madsim` in its own target dir, so the
# production build (real tokio) and the simulated build never share artefacts.
SIM_ENV := RUSTFLAGS="--cfg madsim" CARGO_TARGET_DIR=target/sim
SIM := $(SIM_ENV) cargo run --release -q -p toolop-sim --
DEFAULT_SET := scenarios/smoke.toml scenarios/mcp_faults.toml scenarios/mcp_load.toml scenarios/aip151_faults.toml scenarios/mcp_ext_faults.toml scenarios/mcp_retire.toml scenarios/mcp_sqlite.toml
SCENARIO ?= scenarios/smoke.toml
SEED ?= 42
SERIES ?= 10000
JOBS ?= 2

.PHONY: docs docs-check lint-sim install-sim gate gate-ci canary run replay shrink bench ledger-bench mutants mutants-ci tune test build peers peer-ts peer-python peers-rmcp test-peers-rmcp fault-proxy crash-soak

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

# The scenario reference is generated from the loader's own field table; CI fails on a stale copy.
docs:
	$(SIM) reference > docs/scenario-reference.md

docs-check:
	$(SIM) reference | diff -u docs/scenario-reference.md - || { echo "docs/scenario-reference.md is stale: run make docs and commit it" >&2; exit 1; }

# fmt and clippy for the simulator crate (with the madsim flags, as it is built). The rest of the
# repository is not rustfmt-clean yet; the lead formats it repo-wide and widens this then.
lint-sim:
	cargo fmt -p toolop-sim --check
	$(SIM_ENV) cargo clippy --release -p toolop-sim --all-targets -- -D warnings

# toolop-sim on PATH (~/.cargo/bin), so the commands it prints for pasting work as printed.
install-sim:
	RUSTFLAGS="--cfg madsim" CARGO_TARGET_DIR=target/sim cargo install --locked --path sim

build:
	cargo build --release
	$(SIM_ENV) cargo build --release -p toolop-sim

# Interop peers: the official SDK servers the live tests start (npm and PyPI, from the lock files;
# rmcp from its Cargo.lock), and the fault proxy binary the live sweep puts in front of them.
peers: target/peers-ts.stamp target/peers-python.stamp peers-rmcp fault-proxy

fault-proxy:
	cargo build -q -p toolop-fault-proxy

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
	$(MAKE) --no-print-directory test-peers-rmcp
	# The ledger suite again as the simulator builds it: SQLite in memory under --cfg madsim.
	$(SIM_ENV) cargo test --release -q -p toolop --lib ledger::
	$(SIM_ENV) cargo test --release -p toolop-sim

# The kill -9 proof at length (tests/crash_kill9.rs; `make test` runs it with 200 kills):
# KILLS executor kills, a fresh seed unless CRASH_SEED is given. Same build as `make test`.
KILLS ?= 5000
CRASH_SEED ?=
# OVERLAP=1 also overlaps attempts with a second executor (finds an open liveness bug).
OVERLAP ?= 0
crash-soak: peers
	TOOLOP_CRASH_KILLS=$(KILLS) TOOLOP_CRASH_OVERLAP=$(OVERLAP) $(if $(CRASH_SEED),TOOLOP_CRASH_SEED=$(CRASH_SEED)) cargo test -p toolop --test crash_kill9

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
