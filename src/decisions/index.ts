// Supervised mode: the hook forwarder, the loopback decision hub, trust rules, operator decisions.
export { startDecisionHub, DEFAULT_DECISION_TIMEOUT_MS, type DecisionHub, type DecisionHubOptions, type RunContext, type RunRegistration } from "./hub.ts";
export {
  prepareSupervisedRun,
  filterSupervisedArgs,
  matcherFor,
  hookCommandFor,
  FORWARDER_PATH,
  type SupervisedRun,
  type SupervisedRunOptions,
  type SupervisedTurnFields,
} from "./supervised.ts";
export { decide, type DecideInput, type DecideResult, type DecideTarget } from "./operator.ts";
export { listPending, pendingKey, hubKey, type ListPendingOptions, type PendingEntry, type PendingRequest } from "./pending.ts";
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
  DEFAULT_RISKY_TOOLS,
  decisionRequestedSchema,
  decisionMadeSchema,
  ruleAddedSchema,
  hookInputSchema,
  riskClassOf,
  summarizeInput,
  type Decision,
  type DecisionMade,
  type DecisionRequested,
  type RuleAdded,
  type HookInput,
  type RiskClass,
  type TextScrubber,
} from "./events.ts";
export { reduceDecisions, foldDecisions, initialDecisionState, type DecisionState, type RequestState } from "./state.ts";
export { DecisionError, InvalidRuleError, HubClosedError, type DecideProblem } from "./errors.ts";
