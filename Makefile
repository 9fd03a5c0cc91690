# The two commands: `make demo` and `make test` (see README.md).
SHELL := /bin/bash
VENV := .venv/bin
export PATH := $(HOME)/.cargo/bin:$(PATH)

# `stacklab` and the engine `stacklab-load` on PATH after `make deps`: a link in BIN to
# this checkout's, made only where BIN is writable and holds no other (never replaced).
BIN := /usr/local/bin
STACKLAB := $(CURDIR)/$(VENV)/stacklab
COMMANDS := stacklab stacklab-load

.PHONY: deps test-deps demo test check test-engine test-python clean link

deps:
	./scripts/install-deps.sh
	@$(MAKE) --no-print-directory link

link:
	@for name in $(COMMANDS); do \
	  own=$(CURDIR)/$(VENV)/$$name; \
	  if [ "$$(readlink $(BIN)/$$name)" = "$$own" ]; then \
	    echo "$$name: $(BIN)/$$name is this checkout's"; \
	  elif [ -e $(BIN)/$$name ] || [ -L $(BIN)/$$name ]; then \
	    echo "$$name: $(BIN)/$$name is another one, left as it is; this one is $$own"; \
	  elif [ -d $(BIN) ] && [ -w $(BIN) ]; then \
	    ln -s $$own $(BIN)/$$name && echo "$$name: linked $(BIN)/$$name -> $$own"; \
	  else \
	    echo "$$name: $(BIN) is not writable: run $$own, or add $(CURDIR)/$(VENV) to PATH"; \
	  fi; \
	done

test-deps:
	./scripts/install-deps.sh --test

demo: deps
	$(VENV)/stacklab doctor
	$(VENV)/stacklab run presets/quick.toml
	mkdir -p results
	$(VENV)/stacklab report quick -o results/report.html

test: test-deps test-engine test-python

test-engine:
	cargo test --release --manifest-path engine/Cargo.toml

test-python:
	$(VENV)/pytest -q -rs --durations=25   # each skip and its reason, the slowest tests

# The fast tier while working: every test not marked `integration` (no real server,
# engine or browser; tests/conftest.py fails one that starts any unmarked), on every
# core at once (pytest-xdist: these tests measure nothing, so they may share the CPUs).
# `make test` runs everything, one test at a time, and is what CI runs.
check: test-deps
	$(VENV)/pytest -q -rs -m "not integration" -n auto --durations=10

# The results database is the user's (~/.local/share/stacklab/): never removed here.
clean:
	rm -rf .venv engine/target results
	@for name in $(COMMANDS); do \
	  if [ "$$(readlink $(BIN)/$$name)" = "$(CURDIR)/$(VENV)/$$name" ]; then rm $(BIN)/$$name; fi; \
	done
