# syntax=docker/dockerfile:1

# ---- build: compile TypeScript to dist/ ----
FROM node:20-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
COPY proto ./proto
RUN npm ci && npm run build

# ---- runtime: production dependencies + compiled output only ----
FROM node:20-bookworm-slim AS runtime
ENV NODE_ENV=production
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev && npm cache clean --force
COPY --from=build /app/dist ./dist
COPY proto ./proto
USER node
# 9191: ext_authz gRPC (Envoy)   9192: admin HTTP API
EXPOSE 9191 9192
CMD ["node", "dist/cli/main.js", "serve"]
