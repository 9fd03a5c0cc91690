# The two commands: `make demo` and `make test` (see README.md).
SHELL := /bin/bash
VENV := .venv/bin
export PATH := $(HOME)/.cargo/bin:$(PATH)

# `stacklab` on PATH after `make deps`: a link in BIN to this checkout's, made only where
# BIN is writable and holds no other stacklab (never replaced).
BIN := /usr/local/bin
STACKLAB := $(CURDIR)/$(VENV)/stacklab

.PHONY: deps test-deps demo test test-engine test-python clean link

deps:
	./scripts/install-deps.sh
	@$(MAKE) --no-print-directory link

link:
	@if [ "$$(readlink $(BIN)/stacklab)" = "$(STACKLAB)" ]; then \
	  echo "stacklab: $(BIN)/stacklab is this checkout's"; \
	elif [ -e $(BIN)/stacklab ] || [ -L $(BIN)/stacklab ]; then \
	  echo "stacklab: $(BIN)/stacklab is another stacklab, left as it is; this one is $(STACKLAB)"; \
	elif [ -d $(BIN) ] && [ -w $(BIN) ]; then \
	  ln -s $(STACKLAB) $(BIN)/stacklab && echo "stacklab: linked $(BIN)/stacklab -> $(STACKLAB)"; \
	else \
	  echo "stacklab: $(BIN) is not writable: run $(STACKLAB), or add $(CURDIR)/$(VENV) to PATH"; \
	fi

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
	$(VENV)/pytest -q -rs   # each skip and its reason in the log

# The results database is the user's (~/.local/share/stacklab/): never removed here.
clean:
	rm -rf .venv engine/target results
	@if [ "$$(readlink $(BIN)/stacklab)" = "$(STACKLAB)" ]; then rm $(BIN)/stacklab; fi
