# The manager image: a static binary on a distroless base, run as a non-root user.
# Both bases are build arguments so the file builds where those images are not reachable.
ARG GO_IMAGE=golang:1.26
ARG BASE_IMAGE=gcr.io/distroless/static:nonroot

# The build stage runs on the build machine's platform and cross-compiles for the image's
# (docker buildx build --platform linux/amd64,linux/arm64 runs no arm64 code).
FROM --platform=$BUILDPLATFORM ${GO_IMAGE} AS build
ARG TARGETOS TARGETARCH
WORKDIR /src
COPY go.mod go.sum ./
COPY api/ api/
COPY cmd/ cmd/
COPY internal/ internal/
# The CRD the manager keeps served (--upgrade-crd), embedded by config/crd.
COPY config/crd/ config/crd/
RUN --mount=type=cache,target=/root/.cache/go-build --mount=type=cache,target=/go/pkg/mod \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH go build -trimpath -ldflags "-s -w" -o /out/manager ./cmd/manager

FROM ${BASE_IMAGE}
COPY --from=build /out/manager /manager
USER 65532:65532
ENTRYPOINT ["/manager"]
