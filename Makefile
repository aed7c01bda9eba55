# Thin wrapper over CMake; see README.md.
BUILD ?= build
# The sanitizer build: clang, ASan/UBSan, the fuzz targets (README.md).
SAN_BUILD ?= build-san
JOBS ?= $(shell nproc)
FUZZ_SECONDS ?= 60
FUZZ_TARGETS = $(patsubst tests/fuzz/fuzz_%.cc,%,$(wildcard tests/fuzz/fuzz_*.cc))

.PHONY: all deps build san-build test unit integration fuzz demo bench clean \
	format check-locks lint style deb

all: build

deps:
	@bash deploy/install-deps.sh

$(BUILD)/build.ninja:
	cmake -S . -B $(BUILD) -G Ninja

build: deps $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS)

$(SAN_BUILD)/build.ninja:
	CC=clang CXX=clang++ cmake -S . -B $(SAN_BUILD) -G Ninja -DNACHE_SANITIZE=ON

san-build: deps $(SAN_BUILD)/build.ninja
	cmake --build $(SAN_BUILD) -j $(JOBS)

# The core compiled by clang with its lock annotations checked
# (proxy/util/mutex.h): a guarded field touched without its lock is an
# error. (The sanitizer build, a clang build, checks them too.)
LOCKS_BUILD ?= build-locks
$(LOCKS_BUILD)/build.ninja:
	CC=clang CXX=clang++ cmake -S . -B $(LOCKS_BUILD) -G Ninja
check-locks: deps $(LOCKS_BUILD)/build.ninja
	cmake --build $(LOCKS_BUILD) -j $(JOBS) --target nachecore

# Hygiene: every shell script through shellcheck (its settings and their
# reasons: .shellcheckrc; warnings and errors fail), every C and C++ file
# as clang-format writes it (make format): style; and the lock analysis
# (check-locks).
style: deps
	git ls-files -z '*.sh' deploy/nache-nsm | xargs -0 shellcheck -x -S warning
	git ls-files -z '*.c' '*.h' '*.cc' | xargs -0 clang-format --dry-run -Werror
lint: style check-locks

# Formats every C and C++ file in place (.clang-format files: Google's
# style for C++, the kernel's for the FSAL's C and the C API header).
format:
	git ls-files -z '*.c' '*.h' '*.cc' | xargs -0 clang-format -i

# Everything: style, unit tests then integration tests (they boot the
# lab); then, in the sanitizer build, the unit tests under ASan/UBSan
# (label unit-san) and each fuzz target for a short while over its corpus
# (label fuzz). The sanitizer build is a clang build of the whole core, so
# it is the lock analysis too (a separate check-locks would compile the
# core a third time).
test: style build san-build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)
	cd $(SAN_BUILD) && ctest --output-on-failure -j $(JOBS)

unit: build
	cd $(BUILD) && ctest --output-on-failure -L unit -j $(JOBS)

integration: build
	cd $(BUILD) && ctest --output-on-failure -L integration

# Each fuzz target for FUZZ_SECONDS; new inputs and crashes go to
# $(SAN_BUILD)/tests/fuzz/runs/<target>/ (copy the useful ones into
# tests/fuzz/corpus/<target>/).
fuzz: san-build
	@failed=""; for t in $(FUZZ_TARGETS); do \
	  w=$(SAN_BUILD)/tests/fuzz/runs/$$t; mkdir -p $$w/corpus $$w/artifacts; \
	  echo "fuzz: $$t for $(FUZZ_SECONDS) s"; \
	  LSAN_OPTIONS=suppressions=$(CURDIR)/tests/fuzz/lsan.supp \
	  $(SAN_BUILD)/tests/fuzz/fuzz_$$t -max_total_time=$(FUZZ_SECONDS) \
	    -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
	    -artifact_prefix=$$w/artifacts/ $$w/corpus tests/fuzz/corpus/$$t \
	    || failed="$$failed $$t"; \
	done; \
	if [ -n "$$failed" ]; then echo "fuzz: crashes in:$$failed"; exit 1; fi

demo: build
	bash lab/demo.sh

# The Debian package $(BUILD)/nache_<version>_amd64.deb (debian/; README,
# "Running nache on a branch-office box"). debian/rules reuses $(BUILD) as
# it is when it exists (only the packaging then), or configures it. The
# version is CMakeLists.txt's; debian/changelog must name the same.
VERSION := $(shell sed -n 's/^project.nache VERSION \([0-9.]*\) .*/\1/p' CMakeLists.txt)
deb: deps
	@v=$$(dpkg-parsechangelog -S Version); [ "$$v" = "$(VERSION)" ] || \
	  { echo "deb: debian/changelog is at $$v, CMakeLists.txt at $(VERSION): add a changelog entry (dch -v $(VERSION))" >&2; exit 1; }
	NACHE_BUILD_DIR=$(BUILD) dpkg-buildpackage -b -us -uc --jobs-try=$(JOBS) \
	  --buildinfo-option=-u$(BUILD) --changes-option=-u$(BUILD) \
	  --buildinfo-file=$(BUILD)/nache_$(VERSION)_amd64.buildinfo \
	  --changes-file=$(BUILD)/nache_$(VERSION)_amd64.changes
	@echo "deb: $(BUILD)/nache_$(VERSION)_amd64.deb"

# Benchmarks in the lab (bench/README.md); comma-separated lists, e.g.
#   make bench WORKLOAD=webserver,varmail PROFILE=lan,wan CLIENTS=1,4
#   make bench SHARED=1 WORKLOAD=webserver PROFILE=wan CLIENTS=4
# (other parameters of bench/run.sh pass through the environment).
# NACHE_BUILD_DIR picks the build tree whose stage/ the lab runs.
WORKLOAD ?= webserver
PROFILE ?= lan
CLIENTS ?= 1
CONFIGS ?= direct,proxyv4,nache
SCALE ?= full
REMOTE ?= knfsd
DURATION ?=
NACHE_BUILD_DIR ?= $(BUILD)

bench:
	$(MAKE) build BUILD=$(NACHE_BUILD_DIR)
	NACHE_BUILD_DIR=$(abspath $(NACHE_BUILD_DIR)) WORKLOAD=$(WORKLOAD) \
	  PROFILE=$(PROFILE) CLIENTS=$(CLIENTS) CONFIGS=$(CONFIGS) SCALE=$(SCALE) \
	  REMOTE=$(REMOTE) DURATION=$(DURATION) bash bench/run.sh

clean:
	rm -rf $(BUILD) $(SAN_BUILD) $(LOCKS_BUILD)
