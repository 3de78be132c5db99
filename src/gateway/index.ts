// The model gateway: credential brokering and the one door every model call of a run passes.
export {
  startGateway,
  GATEWAY_DEFAULTS,
  type GatewayOptions,
  type GatewayRunEnv,
  type ModelGateway,
} from "./server.ts";
export { RunGrant, TOKEN_PREFIX, type CallSink, type RunBinding, type Upstream } from "./grants.ts";
export {
  credentialFrom,
  oauthAccessToken,
  OAUTH_BETA,
  unbrokerableProvider,
  upstreamBaseUrl,
  UNBROKERABLE_PROVIDERS,
  type Credential,
  type CredentialKind,
} from "./credential.ts";
export {
  costAtMostUsd,
  estimateCostUsd,
  requestBound,
  retryAfterMs,
  UsageTap,
  worstCaseCostUsd,
  type ModelCall,
  type RequestBound,
  type Usage,
} from "./calls.ts";
export {
  allowAll,
  composePolicies,
  type GatewayPolicy,
  type PolicyCall,
  type PolicyDecision,
  type UpstreamAnswer,
} from "./policy.ts";
export {
  COOLDOWN_DEFAULTS,
  COOLDOWN_STATUSES,
  cooldownKeys,
  cooldownSettings,
  FleetCooldown,
  listCooldowns,
  type CooldownEntry,
  type CooldownOptions,
  type CooldownSettings,
} from "./cooldown.ts";
