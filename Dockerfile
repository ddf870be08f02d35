# syntax=docker/dockerfile:1
# Multi-stage build: a static edgeq binary (CGO_ENABLED=0) on a distroless, non-root base.
#
#   docker build -t edgeq .
#   docker run -p 8080:8080 -p 127.0.0.1:9090:9090 -v $PWD/edgeq-etc:/etc/edgeq:ro edgeq
#
# Mount the directory holding config.yaml (not the file alone, or saved edits are not seen);
# docs/deploy.md has the whole recipe.

FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/edgeq ./cmd/edgeq

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/edgeq /usr/local/bin/edgeq
# In a container the admin listener must be reachable by probes and Prometheus: bind it on all
# interfaces (the /api/* endpoints stay disabled until admin.api_key is set). Publish port 9090 only
# to your cluster network, never to the internet.
ENV EDGEQ_ADMIN_LISTEN=":9090"
# Collect less often: 6-7 % more requests per CPU for a larger heap. Set GOMEMLIMIT below the
# container's memory limit when you run it (docs/deploy.md, "The Go runtime").
ENV GOGC=400
EXPOSE 8080 9090
USER nonroot:nonroot
ENTRYPOINT ["/usr/local/bin/edgeq"]
CMD ["serve", "-config", "/etc/edgeq/config.yaml"]
