# Thin aliases. The simulator builds with `--cfg madsim` in its own target dir, so the
# production build (real tokio) and the simulated build never share artefacts.
SIM_ENV := RUSTFLAGS="--cfg madsim" CARGO_TARGET_DIR=target/sim
SIM := $(SIM_ENV) cargo run --release -q -p toolop-sim --
SCENARIO ?= scenarios/smoke.toml
SEED ?= 42

.PHONY: test run build

build:
	cargo build --release
	$(SIM_ENV) cargo build --release -p toolop-sim

run:
	$(SIM) run --scenario $(SCENARIO) --seed $(SEED)

test:
	cargo test -p toolop
	$(SIM_ENV) cargo test --release -p toolop-sim
