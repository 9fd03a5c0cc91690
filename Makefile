# The two commands: `make demo` and `make test` (see README.md).
SHELL := /bin/bash
VENV := .venv/bin
export PATH := $(HOME)/.cargo/bin:$(PATH)

.PHONY: deps test-deps demo test test-engine test-python clean

deps:
	./scripts/install-deps.sh

test-deps:
	./scripts/install-deps.sh --test

demo: deps
	$(VENV)/stacklab doctor
	$(VENV)/stacklab run presets/quick.toml
	$(VENV)/stacklab report quick -o results/report.html

test: test-deps test-engine test-python

test-engine:
	cargo test --release --manifest-path engine/Cargo.toml

test-python:
	$(VENV)/pytest -q

clean:
	rm -rf .venv engine/target results
