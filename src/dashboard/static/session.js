// One session: turns and attempts (abandoned ones marked with the reason), the transcript as it
// happens, cost and tokens per turn, errors with their kind, a link to each turn's trace; and time
// travel: the session as it stood at any event (the server folds it like `replay --until`).
// Keys: ←/→ step one event, Shift+←/→ ten, Home first, End or L live.
import { ago, badge, count, duration, element, money, tokens } from "./dom.js";
import { renderItem, setSession } from "./transcript.js";
import { applyPatch } from "./patch.js";
import { timelinePanel } from "./timeline.js";

/** The timeline is fetched again at most this often while events arrive. */
const TIMELINE_EVERY_MS = 2000;
/** Sessions up to this many events open with their timeline shown; longer ones when asked. */
const TIMELINE_OPEN_EVENTS = 5000;

function turnFigures(tv) {
  const cost = tv.attempts.reduce((n, a) => n + a.costUsd, 0);
  const tokenTotals = tv.attempts.reduce(
    (acc, attempt) => ({
      input: acc.input + attempt.tokens.input,
      output: acc.output + attempt.tokens.output,
      cacheRead: acc.cacheRead + attempt.tokens.cacheRead,
      cacheCreation: acc.cacheCreation + attempt.tokens.cacheCreation,
    }),
    { input: 0, output: 0, cacheRead: 0, cacheCreation: 0 },
  );
  return { cost, tokenTotals };
}

function traceLink(traceId, tpl) {
  if (!traceId || !tpl) return null;
  return element(
    "a",
    { href: tpl.replace("{traceId}", traceId), target: "_blank", rel: "noopener noreferrer", class: "trace" },
    "trace ↗",
  );
}

function turnHead(model, turnIndex) {
  const tv = model.view.turns[turnIndex];
  const tt = model.transcript.turns[turnIndex];
  if (!tv) return element("div", { class: "turn-head" }, element("span", { class: "tid" }, tt?.turn ?? "?"));
  const { cost, tokenTotals } = turnFigures(tv);
  return element(
    "div",
    { class: "turn-head" },
    element("span", { class: "tid" }, tv.id),
    badge(tv.status),
    element("span", { class: "muted" }, `${tv.attempts.length} attempt${tv.attempts.length === 1 ? "" : "s"}`),
    element("span", {}, money(cost)),
    element("span", { class: "muted" }, tokens(tokenTotals)),
    element("span", { class: "muted" }, duration(tv.startedAt, tv.endedAt)),
    tv.errorKind && tv.errorKind !== "ok"
      ? element("span", { class: "error" }, tv.errorKind, tv.error?.message ? `: ${tv.error.message}` : "")
      : null,
    traceLink(model.traces[tv.id], model.traceUrl),
  );
}

function requestsOf(model, turn) {
  const reqs = model.requests.filter((r) => r.turn === turn);
  if (reqs.length === 0) return null;
  return element(
    "div",
    { class: "requests" },
    reqs.map((request) =>
      element(
        "div",
        { "data-request": request.requestId },
        "decision ",
        element("b", {}, request.toolName ?? "?"),
        " ",
        badge(request.status),
        request.decision ? ` ${request.decision}` : "",
        request.by ? ` by ${request.by}` : "",
        request.status === "pending" || request.status === "parked"
          ? [" · ", element("a", { href: "#/decisions" }, "decide")]
          : null,
      ),
    ),
  );
}

const CHUNK = 100;

function chunked(items) {
  const out = [];
  for (let start = 0; start < items.length; start += CHUNK)
    out.push(element("div", { class: "chunk" }, items.slice(start, start + CHUNK)));
  return out;
}

/** Appends an item to an attempt's last chunk, or a new chunk when that one is full. */
function appendItem(box, el) {
  const last = box.lastElementChild;
  if (last?.classList.contains("chunk") && last.childElementCount < CHUNK) last.append(el);
  else box.append(element("div", { class: "chunk" }, el));
}

function attemptBox(attempt, items) {
  if (attempt.abandoned) {
    return element(
      "details",
      { class: "abandoned", "data-attempt": attempt.attempt },
      element(
        "summary",
        {},
        `abandoned attempt ${attempt.attempt}: ${attempt.abandonReason ?? "abandoned"} (${count(attempt.items?.length ?? attempt.count ?? 0, "item")})`,
      ),
      chunked(items),
    );
  }
  return element("div", { class: "attempt", "data-attempt": attempt.attempt }, chunked(items));
}

/** Builds one turn; `els` keeps its parts so a patch can replace just what changed. */
function renderTurn(model, turnIndex) {
  const tt = model.transcript.turns[turnIndex];
  const head = turnHead(model, turnIndex);
  const reqs = requestsOf(model, tt.turn) ?? element("div");
  const attempts = tt.attempts.map((attempt) => {
    const itemEls = attempt.items.map(renderItem);
    return { box: attemptBox(attempt, itemEls), itemEls, abandoned: attempt.abandoned };
  });
  const prompt = tt.prompt === null ? null : element("div", { class: "prompt" }, tt.prompt);
  const body = element(
    "div",
    { class: "turn-body" },
    prompt,
    attempts.map((a) => a.box),
  );
  const section = element("section", { class: "turn", "data-turn": tt.turn }, head, reqs, body);
  return { section, head, reqs, body, attempts, hasPrompt: prompt !== null };
}

/** The session's labels: its turns', a later turn's value for a name replacing an earlier one's. */
const labelsOf = (view) => Object.assign({}, ...view.turns.map((tv) => tv.labels ?? {}));

/** The tenant and labels, each label one `name=value` chip. */
function dimensionsOf(view) {
  const labels = Object.entries(labelsOf(view));
  return [
    element("span", { class: "tenant" }, "tenant ", element("b", {}, view.tenant ?? "–")),
    labels.length === 0
      ? null
      : element(
          "span",
          { class: "labels" },
          "labels ",
          labels.map(([name, value]) => element("span", { class: "label" }, `${name}=${value}`)),
        ),
  ];
}

/** The session's figures; a past moment shows its own time instead of how long ago it was. */
function figuresOf(view, past) {
  return [
    ...dimensionsOf(view),
    element("span", {}, "cost ", element("b", {}, money(view.costUsd))),
    element("span", {}, "tokens ", element("b", {}, tokens(view.tokens))),
    element("span", {}, "turns ", element("b", {}, String(view.turns.length))),
    element("span", {}, "model ", element("b", {}, view.model ?? "–")),
    past
      ? element("span", {}, "as of ", element("b", {}, view.lastAt ? view.lastAt.replace("T", " ").slice(0, 19) : "–"))
      : element("span", { title: view.lastAt ?? "" }, "last activity ", element("b", {}, ago(view.lastAt))),
    view.lastErrorKind ? element("span", { class: "error" }, `last error ${view.lastErrorKind}`) : null,
    view.cwd ? element("span", { class: "muted" }, view.cwd) : null,
  ].filter(Boolean);
}

/**
 * Redraws what `patch` changed in its turn: the turn whole when its shape changed, else its head and changed items.
 */
function patchTurn(turns, transcript, live, patch) {
  const turnIndex = patch.turnIndex;
  const rendered = turns[turnIndex];
  const tt = live.transcript.turns[turnIndex];
  const reshaped =
    !rendered ||
    rendered.attempts.length !== tt.attempts.length ||
    rendered.attempts.some((a, ai) => a.abandoned !== tt.attempts[ai].abandoned) ||
    rendered.hasPrompt !== (tt.prompt !== null);
  if (reshaped) {
    const fresh = renderTurn(live, turnIndex);
    if (rendered) rendered.section.replaceWith(fresh.section);
    else {
      transcript.querySelector(".empty")?.remove();
      transcript.append(fresh.section);
    }
    turns[turnIndex] = fresh;
    return;
  }
  const head = turnHead(live, turnIndex);
  rendered.head.replaceWith(head);
  rendered.head = head;
  const reqs = requestsOf(live, tt.turn) ?? element("div");
  rendered.reqs.replaceWith(reqs);
  rendered.reqs = reqs;
  for (const ip of patch.items) {
    const attempt = rendered.attempts[ip.attempt];
    const el = renderItem(ip.item);
    const old = attempt.itemEls[ip.index];
    if (old) old.replaceWith(el);
    else appendItem(attempt.box, el);
    attempt.itemEls[ip.index] = el;
  }
}

/**
 * Time travel on a session page: the moment shown (`at`, null while live), moved by goTo, step and
 * toLive; `live()` is the live page (null before its snapshot), `show` renders a page, `where` says
 * where the view stands.
 */
function timeTravel(id, at, { live, show, where }) {
  let travel = at; // null: live
  let asked = 0;
  let inFlight = false;
  let fetched = null;
  // Held-down keys step faster than the server folds: one fetch at a time, always of the latest moment asked for.
  async function fetchMoment() {
    if (inFlight) return;
    inFlight = true;
    try {
      while (travel !== null && travel !== fetched) {
        const seq = travel;
        fetched = seq;
        const ticket = ++asked;
        const res = await fetch(`/api/sessions/${encodeURIComponent(id)}?until=${seq}`);
        const body = await res.json().catch(() => ({}));
        if (ticket !== asked || travel === null) continue;
        if (!res.ok) {
          where.textContent = `event ${seq}: ${body.error ?? res.statusText}`;
          break;
        }
        show(body);
      }
    } finally {
      inFlight = false;
    }
  }
  function goTo(seq) {
    const max = live()?.logSeq ?? seq;
    seq = Math.max(1, Math.min(seq, max));
    if (live() && seq >= max) return toLive();
    travel = seq;
    where.textContent = `event ${seq} of ${max} …`;
    history.replaceState(null, "", `#/session/${encodeURIComponent(id)}/at/${seq}`);
    void fetchMoment();
  }
  function toLive() {
    travel = null;
    fetched = null;
    asked++;
    history.replaceState(null, "", `#/session/${encodeURIComponent(id)}`);
    if (live()) show(live());
  }
  function step(eventCount) {
    const from = travel ?? live()?.logSeq ?? 1;
    void goTo(from + eventCount);
  }
  return {
    get at() {
      return travel;
    },
    goTo,
    toLive,
    step,
  };
}

/** Scrolls to a turn (a search result's link) and marks it. */
function focusTurn(transcript, turn) {
  const section = [...transcript.querySelectorAll("section.turn")].find((s) => s.dataset.turn === turn);
  if (!section) return;
  section.classList.add("focus");
  section.scrollIntoView({ block: "start" });
}

export function sessionView(root, id, at, focus = null) {
  setSession(id);
  let live = null;
  let shown = null;
  let turns = [];
  const title = element("h1", {}, id);
  const status = element("span");
  const figures = element("div", { class: "figures" });
  const slider = element("input", { type: "range", min: 1, max: 1, value: 1, "aria-label": "event number" });
  const where = element("span", { class: "muted", id: "where" });
  const liveBtn = element("button", { title: "back to live (L)" }, "Live");
  const bar = element(
    "div",
    { class: "travel" },
    element("button", { title: "one event back (←)", onclick: () => travel.step(-1) }, "◀"),
    slider,
    element("button", { title: "one event on (→)", onclick: () => travel.step(1) }, "▶"),
    where,
    liveBtn,
  );
  const transcript = element("div", { id: "transcript" });
  const timeline = timelinePanel(id);
  root.append(element("div", { class: "session-head" }, title, status, figures), bar, timeline.panel, transcript);
  let timelineTimer = null;
  /** Fetches the timeline again a moment after events, not once per event. */
  function timelineLater() {
    timelineTimer ??= setTimeout(() => {
      timelineTimer = null;
      void timeline.refresh();
    }, TIMELINE_EVERY_MS);
  }
  const travel = timeTravel(id, at, { live: () => live, show: renderAll, where });

  function renderHead(model) {
    const view = model.view;
    status.replaceChildren(badge(view.status));
    figures.replaceChildren(...figuresOf(view, travel.at !== null));
    const max = Math.max(1, live?.logSeq ?? model.logSeq);
    slider.max = String(max);
    slider.value = String(model.lastSeq);
    where.textContent = travel.at === null ? `live · event ${model.lastSeq}` : `event ${model.lastSeq} of ${max}`;
    bar.classList.toggle("past", travel.at !== null);
    liveBtn.disabled = travel.at === null;
  }

  function renderAll(model) {
    shown = model;
    renderHead(model);
    turns = model.transcript.turns.map((_, i) => renderTurn(model, i));
    transcript.replaceChildren(...turns.map((t) => t.section));
    if (turns.length === 0)
      transcript.append(element("p", { class: "empty" }, model.lastSeq === 0 ? "no events yet" : "no turns"));
    transcript.dataset.seq = String(model.lastSeq);
  }

  function renderPatch(patch) {
    renderHead(live);
    transcript.dataset.seq = String(patch.seq);
    if (patch.turnIndex === null) return;
    patchTurn(turns, transcript, live, patch);
  }

  const es = new EventSource(`/api/sessions/${encodeURIComponent(id)}/stream`);
  es.addEventListener("snapshot", (message) => {
    // Marks for the page-load benchmark (bench/dashboard.ts): arrival, parse, render.
    performance.mark("ts:snapshot");
    live = JSON.parse(message.data);
    performance.mark("ts:parsed");
    if (travel.at === null) renderAll(live);
    else void travel.goTo(travel.at);
    performance.mark("ts:rendered");
    requestAnimationFrame(() => setTimeout(() => performance.mark("ts:painted")));
    window.dispatchEvent(new Event("ts:snapshot"));
    if (focus) {
      focusTurn(transcript, focus);
      timeline.show(focus);
    }
    // Opening it fetches it.
    if (live.logSeq <= TIMELINE_OPEN_EVENTS) timeline.open();
  });
  es.addEventListener("patch", (message) => {
    const patch = JSON.parse(message.data);
    applyPatch(live, patch);
    if (travel.at === null) renderPatch(patch);
    else renderHead(shown);
    timelineLater();
  });

  let debounce;
  slider.addEventListener("input", () => {
    clearTimeout(debounce);
    debounce = setTimeout(() => void travel.goTo(Number(slider.value)), 120);
  });
  liveBtn.addEventListener("click", () => travel.toLive());

  return {
    loading: true,
    unmount: () => {
      es.close();
      clearTimeout(timelineTimer);
    },
    key(event) {
      if (event.target === slider && (event.key === "ArrowLeft" || event.key === "ArrowRight")) return;
      if (event.key === "ArrowLeft") travel.step(event.shiftKey ? -10 : -1);
      else if (event.key === "ArrowRight") travel.step(event.shiftKey ? 10 : 1);
      else if (event.key === "Home") void travel.goTo(1);
      else if (event.key === "End" || event.key === "l" || event.key === "L") travel.toLive();
      else return;
      event.preventDefault();
    },
  };
}
