# The README's test command is `make test`; .ci/run calls exactly that.
GO ?= go

.PHONY: test build vet fmt fuzz bench

build:
	$(GO) build -o bin/weir ./cmd/weir

test:
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout 12m ./...

fuzz:
	$(GO) test ./tron -run '^$$' -fuzz FuzzParseAddress -fuzztime 5s -fuzzminimizetime 100x
	$(GO) test ./tron -run '^$$' -fuzz FuzzDecodeRaw -fuzztime 5s -fuzzminimizetime 100x
	$(GO) test ./cmd/weir/api -run '^$$' -fuzz FuzzDecodeRequest -fuzztime 5s -fuzzminimizetime 100x

bench:
	$(GO) test -run '^$$' -bench . -benchtime 2000x ./eventstore

fmt:
	gofmt -l -w .
