// The web console: `startDashboard` serves sessions, a session's transcript (live or at any event),
// the decisions inbox and the queue, from the log and the projector's read models.
export {
  startDashboard,
  DashboardTokenRequiredError,
  DEFAULT_TRACE_URL,
  type Dashboard,
  type DashboardOptions,
} from "./server.ts";
export { parseTokens } from "./security.ts";
