# voicenote's image: `docker build -t voicenote .` (or `podman build`), then see README.md and
# docs/deploy.md#containers. Debian's ffmpeg by default; `--build-arg FFMPEG=bundled` uses the static
# ffmpeg that comes with the npm package instead (a smaller image).

# The builder: the compiler for the two native modules (better-sqlite3, the libopus binding), which
# npm builds from source wherever no prebuilt binary can be fetched.
FROM node:22-bookworm-slim AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 make g++ \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /app
# The dependencies on their own layer, rebuilt only when the lockfile changes. Their install scripts
# run in `npm rebuild`, since the package's own `prepare` (the build) needs the sources copied below.
COPY package.json package-lock.json ./
RUN npm ci --ignore-scripts --no-audit --no-fund \
 && npm rebuild --no-audit --no-fund \
 && npm cache clean --force
COPY . .
RUN npm run build \
 && npm prune --omit=dev --no-audit --no-fund

# What the runtime copies: with Debian's ffmpeg the bundled binary is dropped here, so that it takes
# no room in the final image.
FROM build AS app
ARG FFMPEG=debian
RUN case "$FFMPEG" in \
      debian) rm -rf node_modules/@ffmpeg-installer/linux-x64 ;; \
      bundled) ;; \
      *) echo "FFMPEG must be debian or bundled, not '$FFMPEG'" >&2; exit 1 ;; \
    esac

FROM node:22-bookworm-slim
ARG FFMPEG=debian
RUN if [ "$FFMPEG" = debian ]; then \
      apt-get update \
      && apt-get install -y --no-install-recommends ffmpeg \
      && rm -rf /var/lib/apt/lists/*; \
    fi
WORKDIR /app
COPY --from=app /app/package.json ./
COPY --from=app /app/bin ./bin
COPY --from=app /app/dist ./dist
COPY --from=app /app/assets ./assets
COPY --from=app /app/src/dashboard/assets ./src/dashboard/assets
COPY --from=app /app/node_modules ./node_modules
# The code stays root's and read-only to the service; its one writable place is the /data volume
# (the SQLite database, the audio cache and, unless SECRET_KEY is set, secret.key).
RUN ln -s /app/bin/voicenote.js /usr/local/bin/voicenote \
 && mkdir /data \
 && chown node:node /data
ENV NODE_ENV=production DATA_DIR=/data HOST=0.0.0.0 PORT=3000
USER node
VOLUME /data
EXPOSE 3000
# The slim image has no curl: node asks /healthz itself (its start alone can take seconds on a busy machine).
HEALTHCHECK --interval=30s --timeout=20s --start-period=30s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.PORT || 3000) + '/healthz').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
ENTRYPOINT ["voicenote"]
CMD ["serve"]
