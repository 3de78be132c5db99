// Supervised mode: the hook forwarder, the loopback decision hub, trust rules, operator decisions.
export {
  startDecisionHub,
  DEFAULT_DECISION_TIMEOUT_MS,
  DEFAULT_ANSWER_WINDOW_MS,
  type DecisionHub,
  type DecisionHubOptions,
  type RunContext,
  type RunRegistration,
} from "./hub.ts";
export {
  prepareSupervisedRun,
  filterSupervisedArgs,
  matcherFor,
  hookCommandFor,
  supervisedTools,
  filterAllowedTools,
  toolSpecs,
  FORWARDER_PATH,
  FORWARDER_ENV,
  type SupervisedRun,
  type SupervisedRunOptions,
  type SupervisedTurnFields,
} from "./supervised.ts";
export { decide, operatorName, type DecideInput, type DecideResult, type DecideTarget } from "./operator.ts";
export {
  generateOperatorKey,
  writeOperatorKeyFile,
  loadOperatorKey,
  operatorKeyFromPem,
  parseOperatorKeys,
  operatorKeyLinesFromEnv,
  keyIdOf,
  PUBLIC_KEY_PREFIX,
  type OperatorKey,
  type OperatorKeyring,
  type GeneratedOperatorKey,
} from "./operator-keys.ts";
export {
  requestDigest,
  signDecision,
  verifyDecision,
  signRule,
  verifyRule,
  checkRule,
  ruleAddedOf,
  ruleOfAdded,
  signRuleRevoked,
  verifyRuleRevoked,
  checkRuleRevoked,
  type Verification,
  type RuleCheck,
  type UnsignedDecision,
  type UnsignedRule,
  type UnsignedRuleRevoked,
} from "./signing.ts";
export {
  revokeRule,
  RuleRevokeError,
  type RevokeInput,
  type RevokeProblem,
  type RevokeResult,
  type RevokeTarget,
} from "./revoke.ts";
export {
  REVOKED_KEPT,
  revocationSchema,
  revokedKey,
  indexRevocation,
  readRevocations,
  checkRevocation,
  revocationRow,
  type Revocation,
  type RecentRevocations,
  type RevocationRow,
} from "./revoked-index.ts";
export {
  sweepSupervisedDirs,
  SUPERVISED_DIR_PREFIX,
  type SupervisedSweepOptions,
  type SupervisedSweepResult,
} from "./sweep.ts";
export { redisAclFile, newAclPasswords, ACL_ROLES, ACL_ROLE_PURPOSE, type AclRole, type AclOptions } from "./acl.ts";
export { inputDigestOf } from "./tool-calls.ts";
export { readParkedRequest, recordedCall, type DeferredCall, type ParkedCall, type ParkedRequest } from "./parked.ts";
export {
  listPending,
  readPendingEntries,
  pendingEntryOf,
  wakeParked,
  wakeKey,
  putPending,
  dropPending,
  getPending,
  parsePendingEntry,
  pendingKey,
  hubKey,
  type ListPendingOptions,
  type PendingEntry,
  type PendingRequest,
} from "./pending.ts";
export {
  countParked,
  parkedNow,
  parkedSinceMs,
  readParkedEntries,
  type ParkedCount,
  type ParkedEntry,
} from "./parked-index.ts";
export {
  RuleStore,
  evaluateRules,
  ruleMatches,
  parsePattern,
  patternForCall,
  escapeGlob,
  subjectOf,
  ruleId,
  rulesKey,
  ruleSchema,
  type TrustRule,
  type RuleEffect,
  type RuleVerdict,
  type CallContext,
} from "./rules.ts";
export {
  decisionRequestedData,
  decisionMadeData,
  ruleAddedData,
  ruleRevokedData,
  type Decision,
  type DecisionMade,
  type DecisionRequested,
  type RuleAdded,
  type RuleRevoked,
  type RiskClass,
} from "../events/index.ts";
export {
  DEFAULT_RISKY_TOOLS,
  SHELL_TOOLS,
  scrubReport,
  hookInputSchema,
  riskClassOf,
  summarizeInput,
  type HookInput,
  type TextScrubber,
} from "./tool-calls.ts";
export {
  reduceDecisions,
  foldDecisions,
  initialDecisionState,
  type DecisionState,
  type FoldTrust,
  type RequestState,
} from "./state.ts";
export {
  DecisionError,
  InvalidRuleError,
  HubClosedError,
  OperatorKeyError,
  OperatorKeysMissingError,
  type DecideProblem,
} from "./errors.ts";
