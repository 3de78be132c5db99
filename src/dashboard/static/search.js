// Search in transcripts: prompts, assistant text, tool calls and results of the sessions in Redis, the
// most recently active first (GET /api/search?q=). The server bounds it (sessions read, results,
// time) and says how far it got; each result opens its session at its turn. The query lives in the
// address (#/search?q=…), so a search can be shared.
import { element } from "./dom.js";

const queryInAddress = () => new URLSearchParams(location.hash.split("?")[1] ?? "").get("q") ?? "";

export function searchView(root) {
  const input = element("input", {
    type: "search",
    placeholder: "search in transcripts  ( / )",
    "aria-label": "search in transcripts",
    size: 50,
  });
  const note = element("span", { class: "muted", role: "status", id: "search-note" });
  const list = element("ol", { id: "search-results" });
  const form = element("form", { class: "toolbar" }, input, element("button", { type: "submit" }, "Search"), note);
  root.append(form, list);
  let asked = 0;

  async function run(query) {
    // The server's bounds, said before asking it.
    if (query.length < 2 || query.length > 200) {
      note.textContent = "search for 2 to 200 characters";
      return list.replaceChildren();
    }
    history.replaceState(
      null,
      "",
      `${location.pathname}${location.search}#/search?${new URLSearchParams({ q: query })}`,
    );
    const ticket = ++asked;
    note.textContent = "searching…";
    const res = await fetch(`/api/search?${new URLSearchParams({ q: query })}`);
    const data = await res.json().catch(() => ({ error: res.statusText }));
    if (ticket !== asked) return;
    if (!res.ok) {
      note.textContent = data.error ?? res.statusText;
      return list.replaceChildren();
    }
    note.textContent = `${data.hits.length} match${data.hits.length === 1 ? "" : "es"} in ${data.scanned} of ${data.sessions} sessions${data.truncated ? " (stopped early: narrow the search)" : ""}`;
    list.replaceChildren(
      ...data.hits.map((hit) =>
        element(
          "li",
          { "data-session": hit.session, "data-turn": hit.turn, "data-where": hit.where },
          element(
            "a",
            { href: `#/session/${encodeURIComponent(hit.session)}/turn/${encodeURIComponent(hit.turn)}` },
            `${hit.session} · ${hit.turn}`,
          ),
          " ",
          element("span", { class: "badge" }, hit.where),
          element("div", { class: "snippet" }, hit.snippet),
        ),
      ),
    );
  }

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    if (input.value.trim()) void run(input.value.trim());
  });
  input.value = queryInAddress();
  if (input.value) void run(input.value);
  else input.focus();
  return {};
}
