# Thin aliases. The simulator builds with `--cfg madsim` in its own target dir, so the
# production build (real tokio) and the simulated build never share artefacts.
SIM_ENV := RUSTFLAGS="--cfg madsim" CARGO_TARGET_DIR=target/sim
SIM := $(SIM_ENV) cargo run --release -q -p toolop-sim --
# The long runs users wait for (the release gate, the benchmark) use the thin-LTO `gate` profile
# (Cargo.toml says why CI's tests do not).
SIM_GATE := $(SIM_ENV) cargo run --profile gate -q -p toolop-sim --
DEFAULT_SET := $(shell grep -v "^\#" scenarios/default-set.txt)
SCENARIO ?= scenarios/smoke.toml
SEED ?= 42
SERIES ?= 10000
JOBS ?= 2

.PHONY: proptest-explore trace-hashes docs docs-check lint install-sim gate gate-ci canary run replay shrink bench profile ledger-bench mutants mutants-ci mutation mutation-diff tune test build peers peer-ts peer-python peers-rmcp test-peers-rmcp fault-proxy crash-soak

PEERS_VENV := target/peers-venv

# Every proptest run by make draws from this one seed, so a verdict (CI's, a mutant's) never
# depends on luck: CI of 262cc0a failed on a core case 2,000-case runs had not drawn in 30
# sessions. `make proptest-explore` draws fresh seeds; what it finds is saved in
# proptest-regressions/ (commit the line: every later run replays it first).
PROPTEST_RNG_SEED ?= 20261205
export PROPTEST_RNG_SEED

# The release gate: 10,000 seeded series of the default set, every invariant, every gate.
gate:
	$(SIM_GATE) gate --scenario $(DEFAULT_SET) --series $(SERIES) --jobs $(JOBS)

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

# The mutation table CI runs: the full 2,000-series budget (about 30 s on 2 cores).
mutants-ci:
	$(SIM) mutants --series 2000 --jobs $(JOBS)

TUNE_SERIES ?= 200
# Tune poll settings: the default grid on the default fault scenario, the same seeds at every point.
tune:
	$(SIM) tune --scenario scenarios/mcp_faults.toml --grid scenarios/grids/default.toml --series $(TUNE_SERIES) --jobs $(JOBS)

# The determinism list (seeds 0..99 of every default scenario; sim/tests/trace_hashes.rs checks
# it). Regenerate only when traces are meant to change, and say why in the commit message.
trace-hashes:
	$(SIM) hashes --scenario $(DEFAULT_SET) --jobs $(JOBS) --write sim/tests/data/trace-hashes.txt

bench:
	$(SIM_GATE) bench --scenario $(DEFAULT_SET) --series $(SERIES) --jobs $(JOBS)

# Where the time goes: `perf` samples of one worker running the default set, with frame pointers
# (their own target dir), shared out by part of the harness (scripts/perf_categories.py). Needs
# perf; the gate's verdict is not this target's business (`-`), the samples are. The old samples
# go first: a perf that cannot record (not installed, not permitted) must not show a past profile.
PROFILE_SERIES ?= 2000
profile:
	RUSTFLAGS="--cfg madsim -C force-frame-pointers=yes" CARGO_TARGET_DIR=target/sim-prof cargo build --release -q -p toolop-sim
	rm -f target/perf.data
	-perf record -F 999 -g -o target/perf.data target/sim-prof/release/toolop-sim gate --scenario $(DEFAULT_SET) --series $(PROFILE_SERIES) --jobs 1 --run profile --color never > /dev/null
	perf script -i target/perf.data -F comm,ip,sym 2>/dev/null | python3 scripts/perf_categories.py

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

# fmt over the whole workspace, clippy for the executor and the fault proxy (real tokio) and for
# the simulator crate (with the madsim flags, as it is built).
lint:
	cargo fmt --all --check
	cargo clippy -p toolop -p toolop-fault-proxy --all-targets -- -D warnings
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

# New proptest cases: EXPLORE_ROUNDS fresh seeds (each printed) of the core's event-sequence
# proptest and the ledgers' equivalence proptest, EXPLORE_CASES cases each.
EXPLORE_ROUNDS ?= 5
EXPLORE_CASES ?= 20000
proptest-explore:
	for i in $$(seq 1 $(EXPLORE_ROUNDS)); do \
	  seed=$$(od -An -N4 -tu4 /dev/urandom | tr -d ' '); echo "proptest seed $$seed"; \
	  PROPTEST_RNG_SEED=$$seed PROPTEST_CASES=$(EXPLORE_CASES) cargo test -q -p toolop --lib -- \
	    core::proptests:: ledger::tests::equivalence:: || { echo "reproduce: PROPTEST_RNG_SEED=$$seed PROPTEST_CASES=$(EXPLORE_CASES) cargo test -p toolop --lib -- core::proptests:: ledger::tests::equivalence::"; exit 1; }; \
	done

# The kill -9 proof at length (tests/crash_kill9.rs; `make test` runs it with 200 kills):
# KILLS executor kills, a fresh seed unless CRASH_SEED is given. Same build as `make test`.
KILLS ?= 5000
CRASH_SEED ?=
# OVERLAP=0 turns off the second executor that now and then overlaps an attempt (on by default).
OVERLAP ?= 1
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

# Mutation testing of the executor with cargo-mutants 27.1.0 (`cargo install cargo-mutants
# --version 27.1.0 --locked`): every mutant of src/{core,ledger,protocol,runner} and record.rs
# is judged by the lib unit tests, the adapter tests and then the simulated gate over the default
# set (tests/sim_gate.rs at MUTATION_SERIES series); config in .cargo/mutants.toml. cargo-mutants
# does not pass --no-fail-fast, so a mutant the unit tests kill never reaches the gate.
# Both target dirs are this tree's (cargo-mutants builds in a scratch copy, which would start
# cold): a mutant rebuilds only the workspace's own crates. Run one `make mutation*` at a time.
# Shard a long run with MUTATION_SHARD=K/N (consecutive slices); results in target/mutation*/.
MUTATION_SHARD ?= 0/1
MUTATION_SERIES ?= 2000
# The simulator's build profile per mutant: `mutants` (Cargo.toml) rebuilds incrementally but
# starts cold (~6 to 12 min on 2 cores); CI uses `release`, which `make test` has just built.
MUTATION_PROFILE ?= mutants
# Per mutant, the test build without debug info links in about half the time (4 s against 9 s
# for a one-line change on a quiet machine); the first run rebuilds the dependencies once.
# Empty keeps the dev profile as it is (CI: `make test` has just built it with debug info).
MUTATION_DEV_DEBUG ?= 0
# The core proptest is 13 of the lib tests' 17 s at its 2,000 cases; every mutant pays for it.
# Lowered here only: a mutant it would catch at case 1,500 still meets the gate.
MUTATION_PROPTEST_CASES ?= 300
MUTATION_ENV := CARGO_TARGET_DIR=$(CURDIR)/target TOOLOP_SIM_GATE_TARGET_DIR=$(CURDIR)/target/sim \
	TOOLOP_SIM_GATE_PROFILE=$(MUTATION_PROFILE) TOOLOP_SIM_GATE_SERIES=$(MUTATION_SERIES) \
	PROPTEST_CASES=$(MUTATION_PROPTEST_CASES) $(if $(MUTATION_DEV_DEBUG),CARGO_PROFILE_DEV_DEBUG=$(MUTATION_DEV_DEBUG))
# A regex over mutant names (`src/core/poll.rs:40:59: replace * with + in ...`) to narrow the
# run, e.g. MUTATION_RE='^src/core/'; empty = everything .cargo/mutants.toml examines.
# (cargo-mutants' --file adds to the config's examine_globs, it cannot narrow them.)
MUTATION_RE ?=
MUTATION_ARGS ?=
MUTANTS := $(MUTATION_ENV) nice -n 10 cargo mutants $(if $(MUTATION_RE),--re '$(MUTATION_RE)') $(MUTATION_ARGS)

mutation:
	mkdir -p target
	$(MUTANTS) --shard $(MUTATION_SHARD) --output target/mutation-$(subst /,-of-,$(MUTATION_SHARD)); \
		status=$$?; touch sim/src/main.rs; exit $$status   # .ci/mutation-diff says why

# Only the mutants on lines changed under src/ since MUTATION_BASE. The default base is the
# merge base with origin/main (main when there is no remote); when that is HEAD itself (a clean
# clone of main) it is HEAD~1, the change that landed last. MUTATION_MAX caps the mutants judged
# (0 = no cap): above it, one round-robin shard of at most MUTATION_MAX is run, chosen by the
# commit, and the output says so. Fails if a mutant in the diff survives (.ci/mutation-diff).
MUTATION_BASE ?=
MUTATION_MAX ?= 0
# MUTATION_MINUTES (0 = none) stops the run after that long and judges the mutants it finished.
MUTATION_MINUTES ?= 0
mutation-diff:
	$(MUTATION_ENV) MUTATION_BASE='$(MUTATION_BASE)' MUTATION_MAX='$(MUTATION_MAX)' MUTATION_MINUTES='$(MUTATION_MINUTES)' \
		MUTATION_ARGS='$(MUTATION_ARGS)' .ci/mutation-diff
