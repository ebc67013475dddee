# The two commands the README opens with, and the steps behind them.
# Meson and Ninja do the real building; this file only sequences the steps.

BUILD      ?= build
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
KERNEL_DIR  = $(BUILD)/kernel
KVMHOST     = tests/harness/kvmhost
PYTEST      = /usr/bin/python3 -m pytest -q -rs
PREFIX     ?= /usr/local
DESTDIR    ?=

.PHONY: all deps build kernel assets demo install uninstall deb check layers unit asan fuzz e2e bench bench-boot bench-exec bench-pull bench-sandbox bench-net bench-egress bench-api bench-share bench-share-workloads bench-share-pjdfstest bench-snapshot bench-oci bench-tui bench-wrap clean

all: build

deps:
	@sh scripts/deps.sh

$(BUILD)/build.ninja:
	meson setup $(BUILD)

build: deps $(BUILD)/build.ninja
	ninja -C $(BUILD)

kernel: deps
	@bash kernel/build.sh $(KERNEL_DIR) >/dev/null

# What `gantry exec` boots, beside the binary: build/assets/.
assets: build kernel
	@mkdir -p $(BUILD)/assets
	@ln -f $(KERNEL_DIR)/vmlinux $(BUILD)/assets/vmlinux
	@bash sysroot/build.sh $(BUILD)/src/guest/gantry-init $(BUILD)/assets/sysroot.erofs >/dev/null
	@bash images/default/build.sh $(BUILD)/assets/default-image >/dev/null

demo: assets
	@sh scripts/demo.sh $(BUILD)

# gantry in PREFIX/bin, what it boots in PREFIX/lib/gantry/assets.
install: assets
	@sh scripts/install.sh $(BUILD) "$(DESTDIR)$(PREFIX)"

uninstall:
	@sh scripts/install.sh --uninstall "$(DESTDIR)$(PREFIX)"

# A Debian package of the same, in $(BUILD)/ (scripts/deb.sh).
deb: assets
	@sh scripts/deb.sh $(BUILD)

unit: build
	meson test -C $(BUILD) --print-errorlogs

asan: deps
	@test -f $(ASAN_BUILD)/build.ninja || \
		meson setup $(ASAN_BUILD) -Db_sanitize=address,undefined -Db_lundef=false
	ninja -C $(ASAN_BUILD)
	meson test -C $(ASAN_BUILD) --print-errorlogs

fuzz: deps
	@test -f $(FUZZ_BUILD)/build.ninja || CC=clang meson setup $(FUZZ_BUILD) \
		-Dfuzzing=true -Db_sanitize=address,undefined -Db_lundef=false
	ninja -C $(FUZZ_BUILD)
	sh tests/fuzz/run-corpus.sh $(FUZZ_BUILD)

# End-to-end: what needs no KVM (CLI errors, the agent protocol, registry
# pulls) on this host, then the tests marked kvm, one test file per KVM test
# host (a nested one when this machine has no usable /dev/kvm). Images that
# need root and network to make are made (once, cached) before, since the
# nested host's root is read-only.
e2e: assets
	$(PYTEST) -m "not kvm" tests/e2e
	tests/e2e/images/debian-minbase.sh >/dev/null
	tests/e2e/images/debian-minbase.sh --dev >/dev/null
	scripts/npm-clients.sh
	tests/e2e/run-kvm $(BUILD)/e2e-results

# No folder of src/ includes a folder that includes it (docs/architecture.md).
layers:
	scripts/include-graph

check: layers unit asan fuzz e2e
	@echo "gantry: all checks passed"

# Each prints its figures and ends with one JSON line (bench/README.md).
bench: bench-boot bench-exec bench-pull bench-sandbox bench-net bench-egress bench-api bench-share bench-share-workloads bench-snapshot bench-oci bench-tui bench-wrap

bench-boot: build kernel
	bench/boot/run
bench-snapshot: build kernel
	bench/snapshot/run
bench-oci: assets
	bench/oci/run
bench-tui: build
	bench/tui/run
bench-wrap: assets
	bench/wrap/run
bench-exec: assets
	bench/exec/run
bench-pull: build
	bench/pull/run
bench-sandbox: assets
	bench/sandbox/run
bench-net: build kernel
	bench/net/run
bench-egress: build
	bench/egress/run
bench-api: assets
	bench/api/run
bench-share: build kernel
	bench/share/run
bench-share-workloads: assets
	bench/share/workloads
# Not in `bench`: it runs a checkout of pjd/pjdfstest given as PJDFSTEST=DIR.
bench-share-pjdfstest: assets
	@test -n "$(PJDFSTEST)" || { echo "make bench-share-pjdfstest PJDFSTEST=DIR (a pjd/pjdfstest checkout)"; exit 2; }
	bench/share/pjdfstest --suite "$(PJDFSTEST)"

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD)
