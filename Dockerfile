# turnstream worker/projector image. Node 24 runs the TypeScript sources directly (type stripping),
# so there is no build stage: install production dependencies from the lockfile and copy the sources.
FROM node:24-bookworm-slim

# The claude CLI's Bash tool runs commands through a shell and often git.
RUN apt-get update \
 && apt-get install -y --no-install-recommends git ca-certificates procps \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /app
ENV NODE_ENV=production
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force

COPY src ./src
COPY workers ./workers

# Not root: the CLI then allows its permission flags without IS_SANDBOX, and each run gets its own
# HOME/config/tmp directories under the user's home.
USER node
CMD ["node", "src/bin/turnstream.ts", "--help"]
