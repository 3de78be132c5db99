// The live model of an open session: a patch from the server (what one event changed) applied to
// the snapshot the page holds, so the page never needs the whole session again.
/** Applies `patch` to `model` in place. */
export function applyPatch(model, patch) {
  const turnsView = model.view.turns;
  model.view = { ...patch.view, turns: turnsView };
  model.lastSeq = model.logSeq = patch.seq;
  if (patch.turnIndex === null) return;
  const turnIndex = patch.turnIndex;
  model.view.turns[turnIndex] = patch.turnView;
  const tt = (model.transcript.turns[turnIndex] ??= { turn: patch.head.turn, attempts: [] });
  Object.assign(tt, {
    prompt: patch.head.prompt,
    promptSeq: patch.head.promptSeq,
    acceptedAttempt: patch.head.acceptedAttempt,
  });
  patch.head.attempts.forEach((attempt, ai) => {
    const heldAttempt = (tt.attempts[ai] ??= { attempt: attempt.attempt, items: [] });
    Object.assign(heldAttempt, {
      attempt: attempt.attempt,
      abandoned: attempt.abandoned,
      abandonReason: attempt.abandonReason,
    });
    heldAttempt.items.length = Math.min(heldAttempt.items.length, attempt.count);
  });
  for (const ip of patch.items) tt.attempts[ip.attempt].items[ip.index] = ip.item;
  model.requests = model.requests
    .filter((r) => r.turn !== patch.head.turn)
    .concat(patch.requests)
    .sort((a, b) => a.seq - b.seq);
  if (patch.traceId) model.traces[patch.head.turn] = patch.traceId;
}
