# parapet — the two set-up commands are `make demo` and `make test`.
SHELL := /bin/bash
export PATH := $(HOME)/.cargo/bin:$(PATH)
CARGO ?= cargo

.PHONY: demo test deps deps-demo build lint bench fmt

deps:
	@scripts/deps.sh test

deps-demo:
	@scripts/deps.sh demo

build: deps-demo
	$(CARGO) build --release --workspace

## demo: build, then run parapet on the built-in example data in examples/.
demo: build
	@scripts/demo.sh

## test: install what the tests need, then formatting, lints and every test.
test: deps
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	$(CARGO) test --workspace --no-fail-fast

fmt:
	$(CARGO) fmt --all

bench: build
	$(CARGO) bench --workspace
