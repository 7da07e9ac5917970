# The README's commands. Each installs dependencies, configures and builds before doing its job.
PRESET ?= cpu
BUILD_DIR := build/$(PRESET)
JOBS ?= $(shell nproc)
ARGS ?=

.PHONY: deps configure build test serve asan clean

deps:
	./scripts/setup-deps.sh

configure: deps
	cmake --preset $(PRESET) >/dev/null

build: configure
	cmake --build $(BUILD_DIR) -j $(JOBS)

test: build
	ctest --test-dir $(BUILD_DIR) --output-on-failure -j $(JOBS)

serve: build
	$(BUILD_DIR)/bin/pagoda serve $(ARGS)

asan:
	$(MAKE) test PRESET=asan

clean:
	rm -rf build
