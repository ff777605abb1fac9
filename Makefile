# parapet — the two set-up commands are `make demo` and `make test`.
SHELL := /bin/bash
export PATH := $(HOME)/.cargo/bin:$(PATH)
CARGO ?= cargo

.PHONY: demo test deps deps-demo build lint bench bench-classify fmt deb man

# bench, bench-quick, bench-deps, bench-clean: the side-by-side run against
# iptables, nftables and ipset in network namespaces (needs root).
include Makefile.bench

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
## Kernel tests are #[ignore = "needs root"]: as root they run too
## (--include-ignored), so the summary line counts what ran; without root
## they are reported as ignored, never as passed. Doc tests run apart:
## --include-ignored would try to compile their `ignore` blocks.
test: deps
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	scripts/import_cycles.py
	@if [ "$$(id -u)" = 0 ]; then \
		echo "make deb  (the package install test installs it)"; \
		$(MAKE) --no-print-directory deb || exit 1; \
		echo "$(CARGO) test --workspace --no-fail-fast --tests -- --include-ignored"; \
		$(CARGO) test --workspace --no-fail-fast --tests -- --include-ignored; s=$$?; \
		echo "PARAPET_WALKER_LOOPS=iter: the object for kernels without may_goto"; \
		PARAPET_WALKER_LOOPS=iter $(CARGO) test -p parapet-dataplane --no-fail-fast \
			--test walker_loops --test walker_bpf --test two_walkers --test conntrack \
			-- --include-ignored || s=1; \
		echo "$(CARGO) test --workspace --no-fail-fast --doc"; \
		$(CARGO) test --workspace --no-fail-fast --doc || s=1; \
		exit $$s; \
	else \
		echo "$(CARGO) test --workspace --no-fail-fast  (not root: kernel tests ignored)"; \
		$(CARGO) test --workspace --no-fail-fast; \
	fi

fmt:
	$(CARGO) fmt --all

## deb: target/deb/parapet_VERSION_ARCH.deb (release build, dpkg-deb, lintian).
deb: deps
	packaging/build-deb.sh

## man: the man pages into target/man and shell completions into
## target/completions, generated from the command definitions.
man: deps-demo
	$(CARGO) build -p parapet
	target/debug/parapet manpages target/man
	@mkdir -p target/completions
	@for s in bash zsh fish; do \
		target/debug/parapet completions $$s > target/completions/parapet.$$s; \
		target/debug/parapet completions $$s --parapetd > target/completions/parapetd.$$s; \
	done
	@echo "man -l target/man/parapet.8; completions in target/completions"

## bench-classify: parapet's classifier against the linear baseline and
## DPDK rte_acl on the ClassBench sets (needs ../shared/data), same run.
bench-classify:
	bench/classify/run.py $(ARGS)
