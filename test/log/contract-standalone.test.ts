import { connectRedis } from "../../src/log/index.ts";
import { logContract } from "./contract.ts";

logContract(
  "standalone",
  async () => connectRedis({ env: { REDIS_URL: process.env["REDIS_URL"] ?? "redis://127.0.0.1:6379" } }),
  async () => {},
);
