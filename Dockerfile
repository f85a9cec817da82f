# Airlock: one static binary on a distroless base — no shell, no package
# manager, a non-root user. Plugins that need an interpreter (python3,
# node) need an image that has it: build FROM this one's binary.
# Plugin sandbox in a container: container runtimes' default seccomp
# profiles refuse user namespaces, so `airlock host` here confines plugins
# at the landlock level (set host.sandbox.level: landlock; Linux 6.7+);
# the namespaces level needs a runtime profile that allows unshare(2).
# `airlock check-config` prints which levels the container allows.
#   docker build -t airlock .
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/airlock ./cmd/airlock

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/airlock /usr/local/bin/airlock
USER 65532:65532
ENV XDG_STATE_HOME=/var/lib
EXPOSE 8899 9464 9467
ENTRYPOINT ["/usr/local/bin/airlock"]
CMD ["serve"]
