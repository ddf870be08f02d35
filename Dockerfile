# syntax=docker/dockerfile:1
# Multi-stage build: a static edgeq binary (CGO_ENABLED=0) in an empty image with nothing else but CA
# certificates, time zones, a non-root user (nonroot, uid and gid 65532) and the example configuration.
#
#   docker build -t edgeq .
#   docker run -p 8080:8080 -p 127.0.0.1:9090:9090 -v $PWD/edgeq-etc:/etc/edgeq:ro edgeq
#
# Mount the directory holding config.yaml (not the file alone, or saved edits are not seen);
# docs/deploy.md has the whole recipe. Without a mount the image serves config.example.yaml, the demo's
# configuration, in front of a shop at http://127.0.0.1:3000 (docs/deploy.md, "Docker").
#
# `make image` assembles the same image without a registry (scripts/image.sh reads the final stage
# below); keep each of its instructions on one line.

FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/edgeq ./cmd/edgeq
# The final stage takes the CA bundle and the time zones from here (Debian's ca-certificates and tzdata,
# both in the golang image; installed should a later one lack them).
RUN test -s /etc/ssl/certs/ca-certificates.crt && test -f /usr/share/zoneinfo/UTC || \
    { apt-get update && apt-get install -y --no-install-recommends ca-certificates tzdata && rm -rf /var/lib/apt/lists/*; }

FROM scratch
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /usr/share/zoneinfo /usr/share/zoneinfo
# root, nobody and nonroot (65532), as distroless names them.
COPY --chmod=0644 deploy/image/passwd deploy/image/group /etc/
COPY --from=build /out/edgeq /usr/local/bin/edgeq
COPY --chmod=0644 config.example.yaml /etc/edgeq/config.yaml
# In a container the admin listener must be reachable by probes and Prometheus: bind it on all
# interfaces (the /api/* endpoints stay disabled until admin.api_key is set). Publish port 9090 only
# to your cluster network, never to the internet.
ENV EDGEQ_ADMIN_LISTEN=":9090"
# Collect less often: 6-7 % more requests per CPU for a larger heap. Set GOMEMLIMIT below the
# container's memory limit when you run it (docs/deploy.md, "The Go runtime").
ENV GOGC=400
EXPOSE 8080 9090
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/edgeq"]
CMD ["serve", "-config", "/etc/edgeq/config.yaml"]
