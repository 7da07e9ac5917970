# The README's commands. Each installs dependencies, configures and builds before doing its job.
PRESET ?= cpu
BUILD_DIR := build/$(PRESET)
JOBS ?= $(shell nproc)
ARGS ?=

FUZZ_SECONDS ?= 60
FUZZ_TARGETS := fuzz_safetensors fuzz_gguf fuzz_tokenizer_json fuzz_chat_template fuzz_http_request fuzz_openai_request \
                fuzz_structured fuzz_tool_calls

.PHONY: deps configure build test test-cuda serve asan asan-ci tsan tsan-ci sanitizers fuzz clean

deps:
	./scripts/setup-deps.sh

configure: deps
	cmake --preset $(PRESET) >/dev/null

build: configure
	cmake --build $(BUILD_DIR) -j $(JOBS)

test: build
	ctest --test-dir $(BUILD_DIR) --output-on-failure -j $(JOBS)
	$(MAKE) test-cuda
	rm -rf build/fuzz/smoke-corpus  # from the committed seeds alone, as on CI's clean clone
	FUZZ_SEED=1 FUZZ_WORK=build/fuzz/smoke-corpus $(MAKE) fuzz FUZZ_SECONDS=30

# The cuda preset compiles, and its GPU tests run: each reports SKIPPED on a machine without a GPU.
test-cuda: deps
	@if [ -x /usr/local/cuda/bin/nvcc ]; then \
	  cmake --preset cuda >/dev/null && cmake --build build/cuda -j $(JOBS) --target pagoda test_cuda && \
	  build/cuda/tests/test_cuda; \
	else echo "test-cuda: no CUDA toolkit in /usr/local/cuda, the cuda preset is not built"; fi

serve: build
	$(BUILD_DIR)/bin/pagoda serve $(ARGS)

# The unit and e2e suites under AddressSanitizer + UndefinedBehaviorSanitizer (no GPU build, no fuzzing).
asan: deps
	cmake --preset asan >/dev/null
	cmake --build build/asan -j $(JOBS)
	ASAN_OPTIONS=detect_leaks=1 PAGODA_E2E_TIME_SCALE=4 ctest --test-dir build/asan --output-on-failure -j $(JOBS)

# What .ci/run adds after `make test`, under ASan + UBSan with leak detection (docs/RELIABILITY.md):
# - the suites of the code that reads untrusted input (tokenizer files, model files, HTTP and OpenAI requests, output
#   constraints and tool calls in model output). Measured on 2 cores: 16.3 min to build cold (with the
#   pagoda binary; -O1 -g1, CMakePresets.json), about a minute to run;
# - since 2026-12-06 also the core, KV, scheduler and engine suites and the `pagoda` binary's server e2e suites
#   (PAGODA_E2E_TIME_SCALE=4, as for TSan). The engine suite runs without what tsan-ci leaves out: batch invariance
#   and the tiny-llama3-hf scenarios, 208 of the suite's 225 s under ASan (one thread's arithmetic; `make asan` runs
#   them). gtest's names do not say the model, so the stories260K scenarios run through ctest, whose names do.
#   Measured on 2 cores, 2026-12-06: 7.5 min to build them cold after the above (68 objects: the binary's cli, bench,
#   plan and eval files and the 4 suites), 26 s to run the 4 suites, 4.0 min the 9 e2e suites: about 12 min added.
# - since 2026-12-07 the backend suite (the CPU kernels, act-order and compact weight forms, the thread pool): a
#   use-after-free at load (act_order.cpp) had gone unseen as no sanitizer job ran it; 26 objects, 1.9 min to build
#   after the above, 3 s to run.
# The e2e tests keep the servers' stderr to themselves, so ASan writes its reports (leaks too) to ASAN_E2E_LOGS, and a
# file there fails the target. UBSan halts the process (exit 1): a server stops answering and its test fails, and
# Server.stop() in tests/e2e/test_server.py fails on any sanitizer report in a server's stderr (at shutdown too).
ASAN_CI_SUITES := test_tokenizer test_loader test_server test_structured test_toolcall test_core test_kv test_sched test_backend
ASAN_CI_ENGINE_FILTER := -*BatchInvariance*:*TinyLlama3*:*EngineScenarios*
ASAN_E2E_LOGS := build/asan/e2e-sanitizer-logs
asan-ci: deps
	cmake --preset asan >/dev/null
	cmake --build build/asan -j $(JOBS) --target $(ASAN_CI_SUITES) test_engine pagoda
	for suite in $(ASAN_CI_SUITES); do ASAN_OPTIONS=detect_leaks=1 build/asan/tests/$$suite || exit 1; done
	ASAN_OPTIONS=detect_leaks=1 build/asan/tests/test_engine --gtest_filter='$(ASAN_CI_ENGINE_FILTER)'
	ASAN_OPTIONS=detect_leaks=1 ctest --test-dir build/asan --output-on-failure -L unit -R 'EngineScenarios.*stories260K'
	rm -rf $(ASAN_E2E_LOGS) && mkdir -p $(ASAN_E2E_LOGS)
	ASAN_OPTIONS="detect_leaks=1 log_path=$(CURDIR)/$(ASAN_E2E_LOGS)/report" PAGODA_E2E_TIME_SCALE=4 \
	  ctest --test-dir build/asan --output-on-failure -R "e2e.test_server"; status=$$?; \
	  if [ -n "$$(ls $(ASAN_E2E_LOGS))" ]; then cat $(ASAN_E2E_LOGS)/*; \
	    echo "asan-ci: AddressSanitizer reports from the e2e suites' processes (above)"; exit 1; fi; exit $$status

# The engine and server tests, and the server e2e tests, under ThreadSanitizer (one OpenMP thread: libgomp
# is not instrumented, and its barriers would be reported).
tsan: deps
	cmake --preset tsan >/dev/null
	cmake --build build/tsan -j $(JOBS) --target test_engine test_server pagoda
	OMP_NUM_THREADS=1 TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
	  ctest --test-dir build/tsan -j $(JOBS) --output-on-failure -L unit -LE backend
	OMP_NUM_THREADS=1 TSAN_OPTIONS="halt_on_error=1" PAGODA_E2E_TIME_SCALE=4 ctest --test-dir build/tsan --output-on-failure -R "e2e.test_server"

# What CI runs after `make test`: both sanitizer suites.
# What .ci/run adds last: the same under ThreadSanitizer without the model-heavy unit tests (batch invariance and the
# tiny-llama3-hf scenarios: one thread's arithmetic, 2,507 of the 2,577 test-seconds of the engine and server unit
# tests under TSan on 2 cores; docs/RELIABILITY.md). Measured on 2 cores: 8.6 min to build cold (-O1 -g1), 6.5 min to
# run (31 s the unit tests, 6 min the server's e2e suites).
# The CPU kernels' thread pool runs under TSan through test_backend's pool suites, which set their own thread counts
# (the engine tests run one thread); the rest of test_backend is left out (-LE backend): its load-time loops open
# OpenMP regions, whose uninstrumented barriers TSan would report.
TSAN_CI_EXCLUDE := BatchInvariance|TinyLlama3|tiny-llama3-hf
TSAN_CI_BACKEND_FILTER := ParallelFor.*:CpuKernelsOnThePool.*:ChunkShares.*
tsan-ci: deps
	cmake --preset tsan >/dev/null
	cmake --build build/tsan -j $(JOBS) --target test_engine test_server test_backend pagoda
	TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" build/tsan/tests/test_backend --gtest_filter='$(TSAN_CI_BACKEND_FILTER)'
	OMP_NUM_THREADS=1 TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
	  ctest --test-dir build/tsan -j $(JOBS) --output-on-failure -L unit -LE backend -E "$(TSAN_CI_EXCLUDE)"
	OMP_NUM_THREADS=1 TSAN_OPTIONS="halt_on_error=1" PAGODA_E2E_TIME_SCALE=4 ctest --test-dir build/tsan --output-on-failure -R "e2e.test_server"

sanitizers: asan tsan

# libFuzzer targets (clang, ASan + UBSan), FUZZ_SECONDS each; findings land in build/fuzz/artifacts/.
fuzz: deps
	cmake --preset fuzz >/dev/null
	cmake --build build/fuzz -j $(JOBS) --target $(FUZZ_TARGETS)
	scripts/fuzz.sh $(FUZZ_SECONDS) $(FUZZ_TARGETS)

clean:
	rm -rf build
