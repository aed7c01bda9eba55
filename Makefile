# Thin wrapper over CMake; see README.md.
BUILD ?= build
JOBS ?= $(shell nproc)

.PHONY: all deps build test unit integration demo bench clean format

all: build

deps:
	@bash deploy/install-deps.sh

$(BUILD)/build.ninja:
	cmake -S . -B $(BUILD) -G Ninja

build: deps $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS)

# Everything: unit tests then integration tests (they boot the lab).
test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

unit: build
	cd $(BUILD) && ctest --output-on-failure -L unit -j $(JOBS)

integration: build
	cd $(BUILD) && ctest --output-on-failure -L integration

demo: build
	bash lab/demo.sh

# Benchmarks in the lab (bench/README.md); comma-separated lists, e.g.
#   make bench WORKLOAD=webserver,varmail PROFILE=lan,wan CLIENTS=1,4
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
	rm -rf $(BUILD)
