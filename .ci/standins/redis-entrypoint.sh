#!/bin/sh
# CI's stand-in for the official redis image's entrypoint, for Debian's Redis 7: the server as the
# redis user in /data, reachable from other containers (the official image turns protected mode off).
set -eu
mkdir -p /data
chown redis:redis /data
cd /data
exec setpriv --reuid=redis --regid=redis --init-groups redis-server --protected-mode no "$@"
