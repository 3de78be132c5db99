// What a CLI run cost. The CLI's `total_cost_usd` is the running total of its CLI session, not of
// the run: a resumed session, cold (from the cost the session file holds) or warm (the same
// process), goes on counting from what its earlier turns spent (measured with CLI 2.1.332: three
// identical turns of one session read $0.000168, $0.000336, $0.000504, cold and warm alike). So a
// run's cost is the rise of that total over `base`, where the CLI session's count stood as the run
// started (attempt.started `costBaseUsd`): 0 for a fresh, forked or replaced CLI session. Reducer,
// metric, replay, `sessions`, the dashboard and the worker's turn.finished all count with this one
// function.

/**
 * The cost a run added once its CLI session reports `total`, having stood at `base` before the run.
 * A total below the base means the CLI started counting again, so all of it is this run's.
 */
export function costAdded(base: number, total: number): number {
  return total >= base ? total - base : total;
}
