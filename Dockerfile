# turnstream worker/projector image: the package built from source in one stage, then only the
# production dependencies and dist/ in the image that runs.
FROM node:24-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json tsconfig.json tsconfig.build.json ./
RUN npm ci --no-audit --no-fund
COPY scripts ./scripts
COPY src ./src
RUN npm run build

FROM node:24-bookworm-slim
# The claude CLI's Bash tool runs commands through a shell and often git.
RUN apt-get update \
 && apt-get install -y --no-install-recommends git ca-certificates procps \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /app
ENV NODE_ENV=production
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force
COPY --from=build /app/dist ./dist

# The turns' workspaces: docker-compose.yml mounts a volume here (TURNSTREAM_WORKSPACE_ROOTS); a
# fresh named volume takes this directory's owner, so the worker can write to it.
RUN mkdir -p /workspace && chown node:node /workspace

# Not root: the CLI then allows its permission flags without IS_SANDBOX, and each run gets its own
# HOME/config/tmp directories under the user's home.
USER node
CMD ["node", "dist/bin/turnstream.js", "--help"]
