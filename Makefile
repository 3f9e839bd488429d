# leaf: `make run` serves on the embedded SQLite default; `make test` checks
# everything (see README.md).
GO ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null)
LDFLAGS := -s -w -X main.version=$(VERSION) -X main.revision=$(REVISION)

IMAGE ?= leaf

.PHONY: run build image test bench clean

run:
	$(GO) run -ldflags "$(LDFLAGS)" . $(ARGS)

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o bin/leaf .

# The container image (Containerfile) of bin/leaf, with podman or docker:
# tagged $(IMAGE):$(VERSION) and $(IMAGE):latest.
image: build
	VERSION=$(VERSION) REVISION=$(REVISION) bash scripts/image.sh $(IMAGE):$(VERSION) $(IMAGE):latest

test:
	bash scripts/test.sh

bench:
	bash scripts/bench.sh

clean:
	rm -rf bin
