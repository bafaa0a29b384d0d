GO ?= go

# fiatjaf.com/nostr hashes events with uintptr arithmetic converted back to
# pointers; the race detector's checkptr instrumentation rejects that pattern
# (a false positive: the reads stay inside the string). checkptr is turned off
# for that one package; the race detector stays on everywhere.
RACE = -race -gcflags=fiatjaf.com/nostr=-d=checkptr=0

.PHONY: test check interop-deps bench bench-pay bench-mcpx bench-compare fuzz build build-fast bench-crypto

# The one command that runs every test (CI runs it through .ci/run).
test: check interop-deps
	$(GO) test $(RACE) -timeout 25m ./...
	$(GO) test $(RACE) -tags libsecp256k1 -timeout 10m $(FAST_TESTED)

# The packages whose tests run a second time on the libsecp256k1 build
# (see build-fast): where events are signed, verified and encrypted, and the
# interop matrix (its cvm is built with the test's backend,
# TestCVMBinaryCryptoBackend). About 3 minutes on a quiet machine.
FAST_TESTED = ./internal/secp ./contextvm ./relay ./bench/cvmbench ./interop

# staticcheck, pinned: go run fetches and builds exactly this version (the
# module proxy serves it as v0.6.1, not by its release name 2025.1.1).
STATICCHECK = honnef.co/go/tools/cmd/staticcheck@v0.6.1

# Static checks: formatting, vet, a tidy module, and staticcheck.
check:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "run gofmt -w"; exit 1; }
	$(GO) vet ./...
	$(GO) mod tidy -diff
	$(GO) run $(STATICCHECK) ./...

# Node packages the interop tests run (pinned by interop/package-lock.json).
interop-deps: interop/node_modules/.package-lock.json interop/thirdparty-relay/node_modules/.package-lock.json \
	interop/identitykit/node_modules/.package-lock.json interop/payments/node_modules/.package-lock.json \
	interop/cashu/node_modules/.package-lock.json interop/typescript/node_modules/.package-lock.json \
	interop/inspector/node_modules/.package-lock.json

interop/node_modules/.package-lock.json: interop/package.json interop/package-lock.json
	cd interop && npm ci --no-audit --no-fund

interop/thirdparty-relay/node_modules/.package-lock.json: interop/thirdparty-relay/package.json interop/thirdparty-relay/package-lock.json
	cd interop/thirdparty-relay && npm ci --no-audit --no-fund

# @nuwa-ai/identity-kit (DIDAuthV1) in its own folder: its @noble/hashes
# range conflicts with @contextvm/sdk's.
interop/identitykit/node_modules/.package-lock.json: interop/identitykit/package.json interop/identitykit/package-lock.json
	cd interop/identitykit && npm ci --no-audit --no-fund

# bolt11 and @getalby/sdk, for the payment interop tests, in their own folder.
interop/payments/node_modules/.package-lock.json: interop/payments/package.json interop/payments/package-lock.json
	cd interop/payments && npm ci --no-audit --no-fund

# @cashu/cashu-ts, the Cashu wallet library cvm's mint and wallet are
# proven against, in its own folder.
interop/cashu/node_modules/.package-lock.json: interop/cashu/package.json interop/cashu/package-lock.json
	cd interop/cashu && npm ci --no-audit --no-fund

# The TypeScript compiler (pinned) that checks the clients cvm gen writes.
interop/typescript/node_modules/.package-lock.json: interop/typescript/package.json interop/typescript/package-lock.json
	cd interop/typescript && npm ci --no-audit --no-fund

# The MCP Inspector, whose --cli mode drives cvm market, in its own folder
# (it brings its own copy of the MCP SDK).
interop/inspector/node_modules/.package-lock.json: interop/inspector/package.json interop/inspector/package-lock.json
	cd interop/inspector && npm ci --no-audit --no-fund

# The default cvm: pure Go, statically linked, secp256k1 in Go (btcec).
build:
	CGO_ENABLED=0 $(GO) build -o bin/cvm ./cmd/cvm

# The fast cvm: signs, verifies and does NIP-44 key agreement with the C
# libsecp256k1 that fiatjaf.com/nostr bundles (needs cgo and a C compiler;
# dynamically linked against libc). "cvm version" names the backend.
build-fast:
	CGO_ENABLED=1 $(GO) build -tags libsecp256k1 -o bin/cvm ./cmd/cvm

# Relay micro-benchmarks, then ContextVM round trips: cvm against the
# reference TypeScript pair on the same relay, in one run, free and paid
# calls (as bench-pay) and memory per idle session; then the gateway's
# overhead per call and memory per client session.
bench: interop-deps
	$(GO) test -run '^$$' -bench . -benchtime 2s ./relay
	$(GO) run ./bench/cvmbench
	$(GO) test -run '^$$' -bench GatewayOverhead -benchtime 300x ./cmd/cvm
	$(GO) test -run '^$$' -bench GatewaySessionMemory -benchtime 1x ./cmd/cvm
	$(GO) test -run '^$$' -bench Middleware -benchtime 1s ./didauth

# Free and paid calls (CEP-8, Lightning through cvm wallet-sim) in one run:
# cvm's client and cvm gateway, the reference pair (@contextvm/sdk, its own
# NWC processor and handler) and the reference client and cvm gateway, every
# peer a process of its own on one cvm relay. Prints p50 and p90 per path,
# paid/free, and cvm's paid p50 over the reference pair's. PAID_CALLS per
# path (default 20).
bench-pay: interop-deps
	$(GO) run ./bench/cvmbench -only paid $(if $(PAID_CALLS),-paid-calls '$(PAID_CALLS)')

# A short run of every fuzz target: every func Fuzz* in a _test.go file,
# found in the code, so that a new one cannot be left out. FUZZTIME per
# target (default 30s).
FUZZTIME ?= 30s
fuzz:
	@git grep -l '^func Fuzz' -- '*_test.go' | while read -r f; do \
		dir=./$$(dirname "$$f"); \
		for fn in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' "$$f"); do \
			echo "$$fn $$dir"; \
			$(GO) test -run '^$$' -fuzz "^$$fn\$$" -fuzztime $(FUZZTIME) "$$dir" || exit 1; \
		done; \
	done

# The MCPx gateway benchmark: the load generator (bench/mcpxload) runs in its
# own process against "cvm room serve" and a minimal baseline hub, and
# prints deliveries/s, latency, round trips and CPU per delivery as ratios.
# CLUSTER=1: 1 node without NATS, 1 node with NATS, 3 nodes with NATS, in one
# run (an embedded nats-server in a child process).
bench-mcpx: build
	$(GO) run ./bench/mcpxload -cvm bin/cvm $(if $(CLUSTER),-cluster)

# The two crypto builds (build, build-fast) against the reference TypeScript
# pair: bench/backends builds cvmbench both ways and runs them alternately
# (N runs each, default 5), then prints median p50s, their ratios to the
# reference pair's and cvm's CPU per call by category (docs/performance.md).
bench-crypto: interop-deps
	$(GO) run ./bench/backends $(if $(N),-n '$(N)')

# Is the new code no slower than the old? bench/compare builds BASE (any git
# revision) in a temporary worktree next to the working tree, runs both
# sides' benchmarks alternately, one at a time (N runs each, default 5):
# contextvm round trips, relay fan-out, and the MCPx gateway under
# bench/mcpxload; then compares the medians. Exit status 0 if every figure is
# within 10% or better, 1 if one is worse or could not be measured, 2 on a
# usage or build error. Takes a few minutes; run nothing heavy meanwhile.
bench-compare: ## BASE=<rev> required
	@test -n '$(BASE)' || { echo 'usage: make bench-compare BASE=<rev> [N=<runs>]  e.g. BASE=HEAD~1 or BASE=main' >&2; exit 2; }
	$(GO) run ./bench/compare -go '$(GO)' -base '$(BASE)' $(if $(N),-n '$(N)')
