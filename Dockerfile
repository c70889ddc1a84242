# syntax=docker/dockerfile:1
# gateway-authz image: `docker build -t gateway-authz .`
# Runs `node dist/cli/main.js serve` as the unprivileged `node` user (uid 1000).
# The same image runs the CLI: `docker compose exec gateway-authz node dist/cli/main.js keys list --account acme`.

# ---- build: compile TypeScript to dist/ ----
FROM node:24.22.3-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
# --ignore-scripts: no dependency needs an install script to compile our code,
# and skipping them keeps node-gyp and the network out of the build.
# --omit=optional: the only optional dependency is the Node binary that
# `npm ci` installs for a machine without Node 24 (docs/operations/runtime.md); the image
# is that Node already.
RUN npm ci --ignore-scripts --omit=optional --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
COPY proto ./proto
RUN npm run build

# ---- runtime: production dependencies + compiled output only ----
FROM node:24.22.3-bookworm-slim AS runtime
ENV NODE_ENV=production
# V8 keeps the heap that garbage once took and grows it lazily: uncapped, a
# replica with its key cache full (200,000 entries, ~100 MB live) showed
# 450-470 MB RSS, near the Kubernetes memory limit. Capped, the same run kept
# ~220 MB at the same throughput (npm run bench, docs/performance/README.md).
ENV NODE_OPTIONS=--max-old-space-size=192
# glibc gives each thread that allocates an arena of its own and keeps what it
# freed there: V8's helper threads (GC, compilers) held 17-18 MB of arenas
# under load. Two arenas held RSS under load at 190-193 MB where the default
# read 198-209 MB, with every other target met (docs/operations/runtime.md).
ENV MALLOC_ARENA_MAX=2
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --omit=optional --ignore-scripts --no-audit --no-fund && npm cache clean --force
COPY --from=build /app/dist ./dist
COPY proto ./proto
# Files stay root-owned and read-only to the service user; the service writes
# nothing to disk (Kubernetes runs it with readOnlyRootFilesystem).
USER node
# A container's loopback is reachable from inside it alone, so the image
# listens on its interface; what leaves it is decided by `docker run -p` and
# the networks it joins. Compose and Kubernetes set their own
# (docs/operations/network-exposure.md).
ENV GRPC_BIND_ADDRESS=0.0.0.0 ADMIN_BIND_ADDRESS=0.0.0.0 CUSTOMER_BIND_ADDRESS=0.0.0.0
# 9191: ext_authz gRPC (Envoy) + grpc.health.v1   9192: admin HTTP API, /healthz, /readyz, /metrics
# 9193: customer dashboard (OpenID Connect sign-in)
EXPOSE 9191 9192 9193
# Ready = Redis answers and not shutting down (/readyz). No curl in slim
# images, so Node's own fetch does the request.
HEALTHCHECK --interval=10s --timeout=3s --start-period=15s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.ADMIN_PORT || 9192) + '/readyz', { signal: AbortSignal.timeout(2000) }).then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
# V8 flags Node refuses in NODE_OPTIONS: let the old generation grow to 1.75 x
# its live size between mark-compacts (V8 picks ~1.4 x for a heap this small),
# so they come less often, and run no memory-reducing GC when the replica goes
# quiet, which dropped the Check path's optimized code. Measured on Node 24 in
# docs/operations/runtime.md; --single-threaded-gc no longer paid there.
CMD ["node", "--heap-growing-percent=75", "--no-memory-reducer", "--max-semi-space-size=8", "dist/cli/main.js", "serve"]
