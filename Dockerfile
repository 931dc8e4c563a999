# Build the nodelet binary, without gRPC's request tracing (grpcnotrace: see
# GO_TAGS in the Makefile).
FROM golang:1.26 AS builder
ARG TARGETOS
ARG TARGETARCH
ARG VERSION=v0.1.0-dev
WORKDIR /workspace
COPY go.mod go.sum ./
RUN go mod download
COPY cmd/ cmd/
COPY api/ api/
COPY internal/ internal/
COPY pkg/ pkg/
RUN CGO_ENABLED=0 GOOS=${TARGETOS:-linux} GOARCH=${TARGETARCH} \
    go build -trimpath -tags grpcnotrace -ldflags "-s -w -X github.com/nodelet/nodelet/internal/version.Version=${VERSION}" -o nodelet ./cmd

# nodelet runs as root in a privileged pod: it manages the node's containers
# through the CRI socket and writes pod logs and state on the host. Without
# Docker, `make image` builds the same binary onto an empty base instead.
FROM gcr.io/distroless/static:latest
WORKDIR /
COPY --from=builder /workspace/nodelet .
ENTRYPOINT ["/nodelet"]
