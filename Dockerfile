# syntax=docker/dockerfile:1
# kars: one image for `kars controller`, `kars router` and the other commands.
#   docker build -t kars:0.1.0 .
#   docker run --rm kars:0.1.0 controller --help

# Build: compile TypeScript, then lay out the production tree (scripts/image-tree.mjs: package
# manifests, compiled dist/ without tests, `npm ci --omit=dev`).
FROM node:20-bookworm-slim AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 make g++ \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN npm ci --no-audit --no-fund \
 && npm run build \
 && node scripts/image-tree.mjs --out /app

# Runtime: Node 20 slim, the production tree only, as the unprivileged `node` user (uid 1000).
FROM node:20-bookworm-slim
ENV NODE_ENV=production
COPY --from=build /app /app
RUN ln -s /app/apps/cli/bin/kars.js /usr/local/bin/kars
USER 1000:1000
WORKDIR /app
EXPOSE 8080
ENTRYPOINT ["kars"]
CMD ["--help"]
