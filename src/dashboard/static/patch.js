// The live model of an open session: a patch from the server (what one event changed) applied to
// the snapshot the page holds, so the page never needs the whole session again.
/** Applies `p` to `model` in place. */
export function applyPatch(model, p) {
  const turnsView = model.view.turns;
  model.view = { ...p.view, turns: turnsView };
  model.lastSeq = model.logSeq = p.seq;
  if (p.turnIndex === null) return;
  const i = p.turnIndex;
  model.view.turns[i] = p.turnView;
  const tt = (model.transcript.turns[i] ??= { turn: p.head.turn, attempts: [] });
  Object.assign(tt, { prompt: p.head.prompt, promptSeq: p.head.promptSeq, acceptedAttempt: p.head.acceptedAttempt });
  p.head.attempts.forEach((a, ai) => {
    const m = (tt.attempts[ai] ??= { attempt: a.attempt, items: [] });
    Object.assign(m, { attempt: a.attempt, abandoned: a.abandoned, abandonReason: a.abandonReason });
    m.items.length = Math.min(m.items.length, a.count);
  });
  for (const ip of p.items) tt.attempts[ip.attempt].items[ip.index] = ip.item;
  model.requests = model.requests
    .filter((r) => r.turn !== p.head.turn)
    .concat(p.requests)
    .sort((a, b) => a.seq - b.seq);
  if (p.traceId) model.traces[p.head.turn] = p.traceId;
}
