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

clean:
	rm -rf $(BUILD)
