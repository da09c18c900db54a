# make test: install redis, chromium and node if needed, vet, race tests against real
# redis-server, the proofs (the browser test of the playground, the service fault suite),
# bench/'s tests, short fuzz runs.

GO ?= go
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

# Fuzz targets run by `make fuzz`, as space-separated pkg:FuzzName pairs with pkg
# relative to the repository root, e.g. internal/policy:FuzzParse.
FUZZ_TARGETS ?= algorithms:FuzzTrace dsl:FuzzLoad dsl:FuzzFormat dsl:FuzzTemplateKey dsl:FuzzProgMatchesHCL engine:FuzzRenderKey httplimit:FuzzHeaders verify:FuzzVerify fuzz:FuzzCommands fuzz:FuzzAlgorithms native:FuzzNative
# Per target in `make test`: 11 targets × 6s, a smoke run; run longer by hand (FUZZTIME=5m make fuzz).
FUZZTIME ?= 6s

.PHONY: test redis-deps browser-deps node-deps vet race bench-tests differential proofs fuzz bench bench-serve build playground
# Run the prerequisites of test one after another, in order, even under -j.
.NOTPARALLEL:

test: redis-deps browser-deps node-deps vet race differential proofs bench-tests fuzz

redis-deps:
	@if command -v redis-server >/dev/null && command -v redis-cli >/dev/null; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ]; then \
		echo "redis-deps: installing redis-server and redis-cli with apt-get"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server; \
	else \
		echo "redis-deps: redis-server or redis-cli not on PATH; run: sudo apt-get install -y redis-server" >&2; \
		exit 1; \
	fi

# The playground's browser test (TestPlaygroundInBrowser, in proofs) drives Debian's
# chromium through its chromedriver.
browser-deps:
	@if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ]; then \
		echo "browser-deps: installing chromium and chromium-driver with apt-get"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver; \
	else \
		echo "browser-deps: chromium or chromedriver not on PATH; run: sudo apt-get install -y chromium chromium-driver" >&2; \
		exit 1; \
	fi

# The playground's Node test (TestWasmInNode, in race) runs the committed module in Debian's
# nodejs; RLCTL_REQUIRE_NODE=1 makes a missing node a failure there, not a skip.
node-deps:
	@if command -v node >/dev/null; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ]; then \
		echo "node-deps: installing nodejs with apt-get"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs; \
	else \
		echo "node-deps: node not on PATH; run: sudo apt-get install -y nodejs" >&2; \
		exit 1; \
	fi

vet:
	$(GO) vet ./...

# The longest stage (about 10 minutes on 2 cores here): each package is reported as it finishes.
race:
	@echo "race: go test -race ./... (compiles every package with the race detector first: about a minute before the first result)"
	RLCTL_REQUIRE_REDIS=1 RLCTL_REQUIRE_NODE=1 $(GO) test -race -count=1 -timeout 20m -json ./... | $(GO) run ./internal/testprogress

# The differential suites again without the race detector, with 1,000 random traces
# per algorithm: real redis-server, luahost and the reference models must agree on each,
# and native's store (engine.NewNative's) with luahost and redis-server (about 25 s); and
# the envoyproxy/ratelimit configuration translation against the peer's lookup on all its
# random configurations (a fifth of them under the race detector; about 16 s).
differential:
	RLCTL_REQUIRE_REDIS=1 RLCTL_TRACES=1000 $(GO) test -count=1 -run 'MatchesModel|NativeMatchesLua|MatchesPeer' ./algorithms ./native ./internal/envoyconf

# The tests that skip under the race detector: those that run verify at its default
# budget (the plugin catalogue: every buggy plugin caught, every correct one passing; the
# verify sessions the README and docs show) and the playground in a headless browser
# (about 10 s), which fails here when chromium or chromedriver is missing; and
# TestPlaygroundMatchesCLI, which under the race detector drops most of its simulate
# checks and all its verify checks; the example scenarios in full (TestSimulateExamples,
# TestProbesBesideSameReport, TestSimulateMemoryCap: the race stage leaves their longest
# simulations out, about 15 s here against 190 s under it), and the CLI scripts that
# simulate and plot every example policy (they skip under the race detector: [race]);
# and the service fault suite, TestServeFaults (rlctl serve processes under load, about
# 40 s: RELIABILITY.md's service table).
proofs:
	RLCTL_REQUIRE_REDIS=1 RLCTL_REQUIRE_BROWSER=1 $(GO) test -count=1 -run 'TestCatalogue|TestPortedFindings|TestReadme|TestDocs|TestPlaygroundInBrowser|TestPlaygroundMatchesCLI|TestServeFaults|TestSimulateExamples|TestProbesBesideSameReport|TestSimulateMemoryCap' ./verify ./cmd/rlctl ./playground
	RLCTL_REQUIRE_REDIS=1 $(GO) test -count=1 -run 'TestScripts/^(simulate_plot|simulate_policies)$$' ./cmd/rlctl

# bench/ is a module of its own, outside ./...: its tests (TestContenders, TestMemory: every
# contender enforces its limit, the memory run finds every key) on a real redis-server and
# redis-benchmark; about 11 s with a warm build cache, a minute from a cold one.
bench-tests:
	cd bench && RLCTL_REQUIRE_REDIS=1 $(GO) test -count=1 ./...

# fuzz:FuzzCommands needs redis-server (as race does): a missing one fails, not skips.
# Go 1.26's fuzzing coordinator may fail a run at the end of -fuzztime with a bare
# "context deadline exceeded" and no failing input (golang/go#75804, fixed in Go 1.27):
# such a run, and only such a run, is run once more; any other failure, or the same one
# twice, fails.
fuzz:
	@for t in $(FUZZ_TARGETS); do \
		if [[ $$t != *:* ]]; then echo "fuzz: $$t is not pkg:FuzzName" >&2; exit 2; fi; \
		pkg=$${t%%:*}; pkg=$${pkg#./}; name=$${t#*:}; out=$$(mktemp); \
		for try in 1 2; do \
			echo "RLCTL_REQUIRE_REDIS=1 $(GO) test -run='^$$' -fuzz='^$$name\$$' -fuzztime=$(FUZZTIME) ./$$pkg"; \
			if RLCTL_REQUIRE_REDIS=1 $(GO) test -run='^$$' -fuzz="^$$name\$$" -fuzztime=$(FUZZTIME) "./$$pkg" 2>&1 | tee "$$out"; then break; fi; \
			if [[ $$try == 1 ]] && grep -qx '    context deadline exceeded' "$$out" && ! grep -q 'Failing input written' "$$out"; then \
				echo "fuzz: $$name stopped on Go's fuzzing deadline race (golang/go#75804), no failing input: running it once more" >&2; \
				continue; \
			fi; \
			rm -f "$$out"; exit 1; \
		done; \
		rm -f "$$out"; \
	done

bench:
	$(GO) test -run='^$$' -bench='BenchmarkLuahost|BenchmarkAllow|BenchmarkMiddleware|BenchmarkSimulate' -benchmem ./algorithms ./engine ./httplimit ./verify
	cd bench && $(GO) run ./cmd/sidebyside

# The Envoy rate limit service: over gRPC against in process, and beside envoyproxy/ratelimit.
bench-serve:
	$(GO) test -run='^$$' -bench='BenchmarkServe$$' -benchtime=20000x -count=2 ./serve
	cd bench && $(GO) run ./cmd/servecompare

build:
	$(GO) build ./...

# The browser playground's WebAssembly module and loader, committed in playground/static:
# rebuild them after changing anything the module compiles (TestWasmIsCurrent fails until
# you do). About a minute from a cold build cache.
playground:
	$(GO) run ./playground/internal/mkwasm
