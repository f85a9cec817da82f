# Airlock build entry points. `make test` is what CI runs (.ci/run).
GO          ?= go
BIN         := bin/airlock
VERSION     ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS     := -X main.version=$(VERSION)

# Pinned tool versions.
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2

.PHONY: all build run test test-short fuzz lint fmt vet bench bench-proxy bench-scale proto proto-check deploy-check examples-check tools clean

all: build

build:
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/airlock
	$(GO) build -trimpath -o bin/tickets-provider ./examples/tickets-provider
	$(GO) build -trimpath -o bin/executa-tickets ./examples/executa-tickets
	$(GO) build -trimpath -o bin/notes-provider ./examples/notes

# The main job on embedded defaults: host, broker, egress proxy and token
# issuer in one process, with the sample provider and a local demo upstream.
run: build
	./$(BIN) dev

# Real services and clients for the integration tests: Redis, curl and
# python3 from Debian packages, and a Vault server built from its Go module
# into a cache outside the clone.
tools:
	@./tools/ensure-pkg.sh curl curl
	@./tools/ensure-pkg.sh /usr/bin/python3 python3
	@./tools/ensure-pkg.sh /usr/lib/python3/dist-packages/requests/__init__.py python3-requests
	@./tools/ensure-pkg.sh /usr/lib/python3/dist-packages/botocore/__init__.py python3-botocore
	@./tools/ensure-pkg.sh /usr/lib/python3/dist-packages/grpc/__init__.py python3-grpcio
	@./tools/ensure-pkg.sh /usr/lib/python3/dist-packages/websockets/__init__.py python3-websockets
	@./tools/ensure-pkg.sh node nodejs
	@./tools/ensure-pkg.sh npm npm
	@./tools/ensure-pkg.sh protoc protobuf-compiler
	@./tools/ensure-pkg.sh /usr/include/google/protobuf/timestamp.proto libprotobuf-dev
	@./tools/ensure-pkg.sh promtool prometheus
	@./tools/ensure-pkg.sh systemd-analyze systemd
	@./tools/ensure-pkg.sh /usr/lib/rabbitmq/bin/rabbitmq-server rabbitmq-server
	@./tools/ensure-redis.sh >/dev/null
	@./tools/ensure-vault.sh >/dev/null

# All tests, race detector on, real Vault and Redis required (a missing one
# fails instead of skipping); before them the linters, the generated-code
# check and the deployment-file checks. GORACE turns off the race
# detector's one-second sleep at every exit of a race-built process (the
# tests re-execute themselves as sandbox inits and helper processes).
# The fuzzing runs beside the tests, one worker at a time: the tests wait
# on subprocesses and servers for much of their time, and the fuzzer
# takes the core they leave idle; its output follows theirs. The
# deployment check leaves the units' Go test to go test ./..., which runs
# it anyway. Four test packages run at once (-p 4; go test's default is
# one per core): most of them wait on plugins, Vault, Redis and RabbitMQ
# more than they compute (docs/testing.md, "Test time").
test: tools lint proto-check
	@CHECK_DEPLOY_UNITS=skip ./tools/check-deploy.sh
	@mkdir -p bin; \
	GO=$(GO) FUZZTIME=$(FUZZTIME) FUZZPARALLEL=1 ./tools/fuzz.sh >bin/fuzz.log 2>&1 & fuzz=$$!; \
	VAULT_BIN="$$(./tools/ensure-vault.sh)" \
	REDIS_SERVER_BIN="$$(./tools/ensure-redis.sh)" \
	AIRLOCK_REQUIRE_SERVICES=1 \
	GORACE=atexit_sleep_ms=0 \
	$(GO) test -race -count=1 -p 4 -timeout 15m ./...; tests=$$?; \
	wait $$fuzz; fuzzed=$$?; cat bin/fuzz.log; \
	if [ $$fuzzed -ne 0 ]; then echo "make test: fuzzing failed (above)"; fi; \
	[ $$tests -eq 0 ] && [ $$fuzzed -eq 0 ]

# Every fuzz target in the tree, each fuzzed for FUZZTIME on top of its
# committed seed corpus (testdata/fuzz/): the hand-written parsers and
# their differential targets against the standard library (net/http) and
# go-jose. A failing input is written to testdata/fuzz/ for the test run.
# One instrumented test binary per package, kept in bin/fuzz/
# (tools/fuzz.sh). A count of inputs, not a duration: a timed run fails
# with "context deadline exceeded" when its time ends inside a slow input
# (seen with the net/http differential targets on a loaded machine).
FUZZTIME ?= 4000x
fuzz:
	@GO=$(GO) FUZZTIME=$(FUZZTIME) ./tools/fuzz.sh

# Unit tests only: integration tests skip when Vault or Redis is missing.
test-short:
	$(GO) test -race ./...

lint: fmt vet examples-check
	$(GO) run $(STATICCHECK) ./...
	cd bench && $(GO) run $(STATICCHECK) ./...

# Every public library package has at least one Example test
# (tools/check-examples.sh); make test runs them with the other tests.
examples-check:
	@GO=$(GO) ./tools/check-examples.sh

fmt:
	@out="$$(gofmt -l $$(git ls-files '*.go'))"; \
	if [ -n "$$out" ]; then echo "not gofmt-ed:"; echo "$$out"; exit 1; fi

# bench/ is a module of its own (its benchmark-only dependencies stay out
# of the product's go.mod), so ./... here does not reach it.
vet:
	$(GO) vet ./...
	cd bench && $(GO) vet ./...

bench:
	AIRLOCK_REQUIRE_SERVICES=1 $(GO) test -run='^$$' -bench=. -benchmem ./...

# Proxy load benchmark: the serve binary first (plain, CONNECT intercept, a
# plugin at each sandbox level), then direct HTTPS, bare goproxy, Airlock
# in-process, the floor, smokescreen (installed into the tool cache),
# mitmproxy with an injecting addon (Debian's mitmproxy) and, with
# TOKENIZER=path, superfly/tokenizer, each in its own process.
# BENCH_FLAGS adds flags (e.g. -profile DIR for the serve binary's CPU
# profiles, -tracing 0.01 for a second serve with tracing on at 1 %; it runs in bench/, a module of its own, so give paths in
# full).
SMOKESCREEN := $(HOME)/.cache/airlock-tools/bin/smokescreen
bench-proxy: build
	@test -x "$(SMOKESCREEN)" || GOBIN="$(dir $(SMOKESCREEN))" $(GO) install github.com/stripe/smokescreen@v0.1.0
	@./tools/ensure-pkg.sh mitmdump mitmproxy
	cd bench && $(GO) run ./proxy -smokescreen "$(SMOKESCREEN)" -mitmdump "$$(command -v mitmdump)" -redis-server "$$(../tools/ensure-redis.sh)" -airlock-bin $(CURDIR)/$(BIN) -processors \
		$(if $(TOKENIZER),-tokenizer "$(abspath $(TOKENIZER))") $(BENCH_FLAGS)

# How costs grow with size (docs/benchmarks.md, "Scale"): the handle
# store (memory, Redis) at 10k / 100k / 1M live handles, the evidence log
# at 10k / 100k / 1M records, and the serve binary with 1k / 5k / 10k
# tunnels and WebSockets open.
bench-scale: build
	cd bench && $(GO) run ./scale -redis-server "$$(../tools/ensure-redis.sh)" $(BENCH_FLAGS)
	cd bench && $(GO) run ./proxy -airlock-bin $(CURDIR)/$(BIN) -conns 1000,5000,10000

# Generated protobuf code is committed; this regenerates it with pinned
# plugin versions (protoc itself from Debian's protobuf-compiler, the
# well-known types it imports from libprotobuf-dev).
PROTOC_GEN_GO      := google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
PROTOC_GEN_GO_GRPC := google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.2
# The shipped systemd units and scripts (tools/check-deploy.sh).
deploy-check:
	@./tools/check-deploy.sh

proto-check:
	@PROTOC_GEN_GO=$(PROTOC_GEN_GO) PROTOC_GEN_GO_GRPC=$(PROTOC_GEN_GO_GRPC) GO=$(GO) ./tools/check-proto.sh

proto:
	@protos="$$(find proto -name '*.proto' | sort)"; \
	if [ -z "$$protos" ]; then echo "no .proto files yet"; exit 0; fi; \
	command -v protoc >/dev/null || { echo "protoc missing: apt-get install -y protobuf-compiler libprotobuf-dev"; exit 1; }; \
	GOBIN="$$PWD/bin" $(GO) install $(PROTOC_GEN_GO) && GOBIN="$$PWD/bin" $(GO) install $(PROTOC_GEN_GO_GRPC) && \
	PATH="$$PWD/bin:$$PATH" protoc -I proto --go_out=. --go_opt=module=github.com/airlock-dev/airlock \
		--go-grpc_out=. --go-grpc_opt=module=github.com/airlock-dev/airlock $$protos
	@# The notes example port (docs/plugin-v1.md), generated as its walk-through says.
	cd examples/notes && PATH="$$PWD/../../bin:$$PATH" protoc -I . -I ../../proto \
		--go_out=. --go_opt=module=github.com/airlock-dev/airlock/examples/notes \
		--go-grpc_out=. --go-grpc_opt=module=github.com/airlock-dev/airlock/examples/notes \
		numinance/ports/notes/v1/notes.proto

clean:
	rm -rf bin
