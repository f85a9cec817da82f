# Airlock: one static binary on a distroless base — no shell, no package
# manager, a non-root user. Plugins that need an interpreter (python3,
# node) need an image that has it: build FROM this one's binary.
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
