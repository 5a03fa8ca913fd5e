#!/usr/bin/env bash
# CI's container leg: the Dockerfile and compose.yaml, built and started with Debian's podman.
#   1. podman, podman-compose, buildah and mmdebstrap from apt, where missing.
#   2. The public base images as local stand-ins, where missing (.ci/container-standins.sh).
#   3. The image, built with buildah (layers kept, so a warm run rebuilds only what changed).
#   4. One container on a volume: /healthz, /readyz and /docs from the host, the image's HEALTHCHECK,
#      the owner block in its logs, a sandbox note sent with `voicenote send` inside it delivered,
#      SIGTERM ending it with exit 0, and a second start on the same volume creating no second owner.
#   5. compose.yaml: the service on PostgreSQL (its log says `"storage":"postgres"`) and a sandbox
#      note delivered.
# Every container, pod, volume and network it makes is named after this run and removed on exit,
# whatever happens; the stand-ins and the image's layers are kept for the next run.
set -euo pipefail
cd "$(dirname "$0")/.."
export CONTAINERS_CONF="$PWD/.ci/containers.conf"

RUN="vnci$$"                        # the prefix of everything this run makes
IMAGE=localhost/voicenote:latest    # the name compose.yaml's `image: voicenote` resolves to
BOT_TOKEN=123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawQ
say() { printf -- '--- container: %s\n' "$*"; }
fail() { printf -- '--- container: FAILED: %s\n' "$*" >&2; exit 1; }

install_tools() {
  local missing=()
  command -v podman >/dev/null || missing+=(podman)
  command -v podman-compose >/dev/null || missing+=(podman-compose)
  command -v buildah >/dev/null || missing+=(buildah)
  command -v mmdebstrap >/dev/null || missing+=(mmdebstrap)
  command -v runc >/dev/null || missing+=(runc)
  [ ${#missing[@]} -eq 0 ] && return
  say "installing ${missing[*]}"
  local as_root=""
  if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null; then as_root="sudo"; fi
  $as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q
  $as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}"
}

cleanup() {
  local status=$?
  set +e
  say "removing what this run made ($RUN*)"
  # -v: with its container, each anonymous volume of an image's VOLUME (redis's /data) goes too.
  podman ps -a --format '{{.Names}}' | grep "^$RUN" | xargs -r podman rm -f -v -t 0 >/dev/null
  podman pod ls --format '{{.Name}}' | grep "$RUN" | xargs -r podman pod rm -f >/dev/null
  podman volume ls --format '{{.Name}}' | grep "^$RUN" | xargs -r podman volume rm -f >/dev/null
  podman network ls --format '{{.Name}}' | grep "^$RUN" | xargs -r podman network rm -f >/dev/null
  local left
  left="$( { podman ps -a --format '{{.Names}}'; podman volume ls --format '{{.Name}}'; podman network ls --format '{{.Name}}'; } | grep -c "^$RUN")"
  echo "--- container: volumes in no container now: $(podman volume ls --quiet --filter dangling=true | wc -l)"
  if [ "$left" != 0 ]; then echo "--- container: $left containers, volumes or networks of this run are left" >&2; [ $status = 0 ] && status=1; fi
  exit $status
}
trap cleanup EXIT

# Waits (at most $2 seconds) until the URL answers 200.
wait_ok() {
  local url="$1" limit="$2" waited=0
  until [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$url")" = 200 ]; do
    [ $waited -ge "$limit" ] && return 1
    sleep 2; waited=$((waited + 2))
  done
}

# The sandbox key from a container's first-start block.
# (Logs are read whole before grep: with pipefail, a grep that stops early fails the pipe by SIGPIPE.)
logs_of() { podman logs "$1" 2>&1; }
sandbox_key() { grep -o 'sk_test_[A-Za-z0-9_-]*' <<<"$(logs_of "$1")" | sed -n 1p; }

# A sandbox note sent with the CLI inside the container, followed until it settles: delivered.
send_note() {
  local container="$1" key="$2" out
  out="$(podman exec -e VOICENOTE_KEY="$key" "$container" voicenote send --platform telegram --recipient 123456789 \
    --bot-token "$BOT_TOKEN" --audio http://localhost:3000/samples/hello.ogg --wait)"
  echo "$out"
  grep -q '"status": *"delivered"' <<<"$out" || fail "the sandbox note sent in $container was not delivered"
}

exit_code() { podman inspect --format '{{.State.ExitCode}}' "$1"; }

install_tools
podman --version

say "stand-ins for the public base images"
bash .ci/container-standins.sh

say "building the image (buildah, layers kept)"
started=$SECONDS
nice -n 10 buildah bud --isolation chroot --format docker --layers --pull=false -t "$IMAGE" .
say "image built in $((SECONDS - started)) s, $(podman image inspect --format '{{.Size}}' "$IMAGE" | awk '{printf "%d MB", $1 / 1e6}')"

say "one container on a volume"
podman volume create "$RUN-data" >/dev/null
podman run -d --health-interval disable --name "$RUN-first" -p 127.0.0.1::3000 -v "$RUN-data:/data" "$IMAGE" >/dev/null
port="$(podman port "$RUN-first" 3000/tcp | sed 's/.*://')"
base="http://127.0.0.1:$port"
wait_ok "$base/healthz" 120 || { podman logs "$RUN-first"; fail "/healthz did not answer 200 on $base"; }
# Ready once storage answers: waited for, as an orchestrator does (it answered 503 once, just after start).
wait_ok "$base/readyz" 60 || { curl -s "$base/readyz"; podman logs "$RUN-first"; fail "/readyz did not answer 200"; }
for path in /healthz /readyz /docs; do
  code="$(curl -s -L -o /dev/null -w '%{http_code}' --max-time 10 "$base$path")"
  echo "GET $path: $code"
  [ "$code" = 200 ] || fail "GET $path answered $code"
done
[ "$(podman exec "$RUN-first" id -u)" != 0 ] || fail "the service runs as root"
# podman runs HEALTHCHECKs from systemd timers, and this machine has no systemd: run once by hand.
podman healthcheck run "$RUN-first" && echo "HEALTHCHECK: healthy" || fail "the image's HEALTHCHECK failed"
# The block is written just after the server starts listening: waited for (at most 60 s).
for _ in $(seq 1 30); do grep -q 'first start. Created the owner account' <<<"$(logs_of "$RUN-first")" && break; sleep 2; done
grep -q 'first start. Created the owner account' <<<"$(logs_of "$RUN-first")" || fail "no owner block in the logs"
key="$(sandbox_key "$RUN-first")"
[ -n "$key" ] || fail "no sandbox key in the logs"
send_note "$RUN-first" "$key"
podman stop -t 30 "$RUN-first" >/dev/null   # SIGTERM
code="$(exit_code "$RUN-first")"
echo "exit code after SIGTERM: $code"
[ "$code" = 0 ] || fail "SIGTERM ended the service with $code"

say "a second start on the same volume"
podman run -d --health-interval disable --name "$RUN-again" -p 127.0.0.1::3000 -v "$RUN-data:/data" "$IMAGE" >/dev/null
port="$(podman port "$RUN-again" 3000/tcp | sed 's/.*://')"
wait_ok "http://127.0.0.1:$port/readyz" 120 || { podman logs "$RUN-again"; fail "the second start is not ready"; }
if grep -q 'first start' <<<"$(logs_of "$RUN-again")"; then fail "the second start created a second owner"; fi
echo "no second owner; the first start's key still sends:"
send_note "$RUN-again" "$key"
podman stop -t 30 "$RUN-again" >/dev/null
[ "$(exit_code "$RUN-again")" = 0 ] || fail "SIGTERM ended the second start with $(exit_code "$RUN-again")"

say "compose.yaml: voicenote, PostgreSQL and Redis"
compose_port="$(node -e "const s = require('net').createServer().listen(0, '127.0.0.1', () => { console.log(s.address().port); s.close(); })")"
compose() {
  SECRET_KEY="$(head -c 32 /dev/urandom | base64)" VOICENOTE_PORT="$compose_port" \
    podman-compose --project-name "$RUN" --file compose.yaml "$@"
}
compose up -d --no-build >/dev/null
app="$(podman ps -a --format '{{.Names}}' | grep "^${RUN}_voicenote_")" || fail "compose started no voicenote container"
wait_ok "http://127.0.0.1:$compose_port/readyz" 180 || { podman ps -a; podman logs "$app"; fail "voicenote in compose is not ready"; }
grep -o '"storage":"postgres"' <<<"$(logs_of "$app")" | sed -n 1p | grep . || fail "voicenote in compose does not say storage: postgres"
key="$(sandbox_key "$app")"
[ -n "$key" ] || fail "no sandbox key in the compose service's logs"
send_note "$app" "$key"
say "passed"
