# leafid: multi-stage build. cargo-chef caches the dependency layer, so a source change rebuilds
# only the crate; the runtime image is slim Debian with the binary, its config/ and a non-root user.
#
#   docker build -t leafid .
#   docker run -p 127.0.0.1:8080:8080 -e LEAFID__ADMIN__TOKEN=... leafid
#
# The server binds 0.0.0.0 in the container (LEAFID__SERVER__HOST below): requests then come
# from outside loopback, so admin writes (POST/PATCH/DELETE /api/v1/tags) need
# LEAFID__ADMIN__TOKEN; without it they are all refused (401). Default database: an SQLite file
# in the /app/data volume; set LEAFID__DATABASE__URL=mysql://... for MySQL/MariaDB/TiDB.

ARG RUST_VERSION=1.95
ARG DEBIAN_RELEASE=bookworm

FROM rust:${RUST_VERSION}-slim-${DEBIAN_RELEASE} AS chef
RUN cargo install cargo-chef --locked --version 0.1.78
WORKDIR /build

# The recipe lists the dependencies only: it changes when Cargo.toml or Cargo.lock do.
FROM chef AS planner
COPY . .
RUN cargo chef prepare --recipe-path recipe.json

FROM chef AS builder
COPY --from=planner /build/recipe.json recipe.json
RUN cargo chef cook --release --locked --bin leafid --recipe-path recipe.json
# The crate embeds config/default.toml and migrations/ at compile time. Cargo also validates
# every target Cargo.toml declares ([[bench]], [[test]], [[example]]) before it builds anything,
# even with --bin: no cargo flag skips that. So the stage copies the directories targets live in
# too, rather than lean on the stub sources `cargo chef cook` happens to leave behind for them
# (copied alone, Cargo.toml + src fail: "can't find `engines` bench"). The price: editing a test
# rebuilds this crate (only it; the dependencies stay in the cook layer above).
# scripts/docker-check.sh builds what these COPY lines copy, and nothing else, without Docker.
COPY Cargo.toml Cargo.lock build.rs ./
# The gRPC door's proto, compiled by build.rs (protox: no protoc in the image).
COPY proto ./proto
COPY src ./src
COPY config ./config
COPY migrations ./migrations
COPY benches ./benches
COPY examples ./examples
COPY tests ./tests
# A workspace member: cargo loads every member's manifest (and its targets) before it builds.
COPY clients/rust ./clients/rust
RUN cargo build --release --locked --bin leafid

FROM debian:${DEBIAN_RELEASE}-slim AS runtime
# DL3008 (pin apt versions) is ignored on purpose: bookworm's mirrors keep only the current
# version of a package, so a pin (ca-certificates=20230311+deb12u1) breaks the build at the next
# point release or security update, and the CA bundle is the one package that must stay current.
# The release is pinned instead (DEBIAN_RELEASE); rebuild to pick up its updates.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --system --gid 10001 leafid \
    && useradd --system --uid 10001 --gid leafid --home-dir /app --shell /usr/sbin/nologin leafid \
    && mkdir -p /app/data \
    && chown leafid:leafid /app/data
WORKDIR /app
COPY --from=builder /build/target/release/leafid /usr/local/bin/leafid
COPY config/ /app/config/
# Numeric (the leafid user above): Kubernetes runAsNonRoot can verify it without /etc/passwd.
USER 10001:10001
ENV LEAFID__SERVER__HOST=0.0.0.0 \
    LEAFID__SERVER__PORT=8080 \
    LEAFID__LOG__FORMAT=json
EXPOSE 8080
VOLUME ["/app/data"]
# `leafid healthcheck` GETs http://127.0.0.1:$LEAFID__SERVER__PORT/health/live: no curl needed.
HEALTHCHECK --interval=10s --timeout=5s --start-period=15s --retries=3 CMD ["leafid", "healthcheck"]
ENTRYPOINT ["leafid"]
CMD ["serve"]
