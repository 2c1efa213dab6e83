# syntax=docker/dockerfile:1
# For people who build with Docker; `make image` builds the same layout
# without a daemon (cmd/rgit-image) and reproducibly. Both give static
# binaries in /usr/local/bin, a CA bundle, user 65532 and the /cache volume.
#
#   docker build --build-arg VERSION=$(git describe --tags --always) -t rgit .
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=devel
ARG COMMIT=unknown
ARG DATE=unknown
RUN CGO_ENABLED=0 go build -trimpath \
      -ldflags "-X github.com/rgit/rgit/transport/node/version.version=${VERSION} -X github.com/rgit/rgit/transport/node/version.commit=${COMMIT} -X github.com/rgit/rgit/transport/node/version.date=${DATE}" \
      -o /out/ ./cmd/rgit ./cmd/rgit-admin \
 && mkdir -p /rootfs/etc /rootfs/cache /rootfs/tmp \
 && printf 'root:x:0:0:root:/root:/sbin/nologin\nrgit:x:65532:65532:rgit:/cache:/sbin/nologin\n' > /rootfs/etc/passwd \
 && printf 'root:x:0:\nrgit:x:65532:\n' > /rootfs/etc/group \
 && chown 65532:65532 /rootfs/cache && chmod 1777 /rootfs/tmp

FROM scratch
ARG VERSION=devel
ARG COMMIT=unknown
LABEL org.opencontainers.image.title=rgit \
      org.opencontainers.image.version=${VERSION} \
      org.opencontainers.image.revision=${COMMIT} \
      org.opencontainers.image.source=https://github.com/rgit/rgit
COPY --from=build /rootfs/ /
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /out/rgit /out/rgit-admin /usr/local/bin/
ENV PATH=/usr/local/bin RGIT_CACHE_DIR=/cache SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt
USER 65532:65532
WORKDIR /cache
VOLUME /cache
EXPOSE 8080 2222 8081 8082 8090
ENTRYPOINT ["/usr/local/bin/rgit"]
CMD ["serve"]
