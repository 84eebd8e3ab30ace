// The memory inspector: reads one project through the memory API with the token kept in this
// tab's session storage. Read routes only. Everything from the store is put on the page as
// text (createTextNode / textContent), never as markup.
"use strict";

const TOKEN_KEY = "satchel.inspect.token";
const $ = (id) => document.getElementById(id);

// An element with text children (strings become text nodes) and a class name.
function el(tag, className, ...children) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(typeof child === "string" || typeof child === "number"
      ? document.createTextNode(String(child)) : child);
  }
  return node;
}

function when(instant) {
  return instant ? new Date(instant).toISOString().replace(".000Z", "Z") : "—";
}

class Refused extends Error {
  constructor(status, message) { super(message); this.status = status; }
}

// One API call with the bearer token; the answer's JSON, or Refused with the API's message.
async function api(path, body, token = sessionStorage.getItem(TOKEN_KEY)) {
  const init = {
    method: body === undefined ? "GET" : "POST",
    headers: { Authorization: `Bearer ${token || ""}` },
    cache: "no-store",
    credentials: "omit",
    referrerPolicy: "no-referrer",
  };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const answer = await fetch(path, init);
  const data = await answer.json().catch(() => null);
  if (!answer.ok) {
    const message = data && data.error ? `${data.error.code}: ${data.error.message}`
      : `HTTP ${answer.status}`;
    if (answer.status === 401 && token === sessionStorage.getItem(TOKEN_KEY)) signOut(message);
    throw new Refused(answer.status, message);
  }
  return data;
}

// ---- signing in and out

async function signIn(event) {
  event.preventDefault();
  const input = $("token");
  const token = input.value.trim();
  input.value = "";
  $("signin-error").textContent = "";
  try {
    await api("/v1/freshness", undefined, token);
  } catch (refused) {
    $("signin-error").textContent = `Refused: ${refused.message}`;
    return;
  }
  sessionStorage.setItem(TOKEN_KEY, token);
  show();
}

function signOut(reason) {
  sessionStorage.removeItem(TOKEN_KEY);
  for (const id of ["freshness", "subjects", "registered", "passages", "turns", "facts",
    "segments"]) $(id).replaceChildren();
  $("parked").tBodies[0].replaceChildren();
  $("inspector").hidden = true;
  $("signout").hidden = true;
  $("signin").hidden = false;
  $("signin-error").textContent = reason ? `Signed out: ${reason}` : "";
}

function show() {
  $("signin").hidden = true;
  $("inspector").hidden = false;
  $("signout").hidden = false;
  loadStatus();
  loadSubjects(null);
  loadRegistered();
  loadParked();
}

// ---- the project: freshness, worker, subjects, parked turns

function term(list, name, value) {
  list.append(el("dt", "", name), el("dd", "", value));
}

async function loadStatus() {
  const list = $("freshness");
  try {
    const [fresh, worker] = await Promise.all([api("/v1/freshness"),
      api("/v1/inspect/worker", {})]);
    list.replaceChildren();
    term(list, "stored through", fresh.stored === null ? "nothing yet" : String(fresh.stored));
    term(list, "formed through", fresh.formed === null ? "nothing yet" : String(fresh.formed));
    term(list, "parked", String(fresh.parked));
    if (fresh.rebuilding) term(list, "rebuilding", "yes");
    term(list, "worker", worker.running === 0 ? "none running"
      : `${worker.running} running, last beat ${Math.round(worker.beat_age_seconds)} s ago`);
  } catch (refused) {
    list.replaceChildren(el("dd", "refusal", refused.message));
  }
}

function pick(label, count, subject) {
  const button = el("button", "", label, count ? el("span", "count", ` (${count})`) : null);
  button.type = "button";
  button.addEventListener("click", () => openSubject(subject));
  return el("li", "", button);
}

async function loadSubjects(after) {
  const page = await api("/v1/inspect/subjects", after ? { after } : {}).catch(() => null);
  if (!page) return;
  if (!after) $("subjects").replaceChildren();
  for (const s of page.subjects) {
    $("subjects").append(pick(s.data_subject_id, `${s.turns} turns`, s.data_subject_id));
  }
  const more = $("more-subjects");
  more.hidden = !page.next;
  more.onclick = page.next ? () => loadSubjects(page.next.data_subject_id) : null;
}

async function loadRegistered() {
  const page = await api("/v1/subjects/list", { limit: 100 }).catch(() => null);
  if (!page) return;
  $("registered").replaceChildren(...page.subjects.map((s) => pick(
    s.label || s.external_reference || s.id, s.label ? s.id : "", s.id)));
  if (!page.subjects.length) $("registered").append(el("li", "note", "None."));
}

async function loadParked() {
  const page = await api("/v1/inspect/parked", { limit: 100 }).catch(() => null);
  if (!page) return;
  const rows = page.parked.map((turn) => {
    const row = el("tr", "");
    for (const value of [turn.log_offset, turn.kind, turn.attempts, when(turn.parked_at),
      turn.failure || "—"]) row.append(el("td", "", String(value)));
    row.append(el("td", "id", turn.id));
    return row;
  });
  $("parked").tBodies[0].replaceChildren(...rows);
  $("parked-none").hidden = rows.length > 0;
}

// ---- one subject: turns, facts (evidence, history), segments

let current = null;

function openSubject(subject) {
  current = subject;
  $("subject-id").value = subject;
  $("subject-title").textContent = `Subject ${subject}`;
  $("subject-error").textContent = "";
  $("subject-body").hidden = false;
  $("passages").replaceChildren();
  $("search-note").textContent = "";
  for (const id of ["turns", "facts", "segments"]) $(id).replaceChildren();
  loadTurns(subject, null);
  loadFacts(subject, null);
  loadSegments(subject, null);
}

function more(id, next, load) {
  const button = $(id);
  button.hidden = !next;
  button.onclick = next ? load : null;
}

function failed(refused) {
  $("subject-error").textContent = refused.message;
}

async function loadTurns(subject, after) {
  const body = { data_subject_id: subject };
  if (after !== null) body.after = after;
  const page = await api("/v1/inspect/turns", body).catch(failed);
  if (!page || subject !== current) return;
  for (const turn of page.turns) {
    const item = el("li", "turn",
      el("div", "meta", `offset ${turn.log_offset} · ${when(turn.occurred_at)} · ${turn.state}`));
    for (const message of turn.messages) {
      item.append(el("div", "message", el("span", "role", message.role),
        el("span", "meta", when(message.occurred_at)), el("div", "text", message.text)));
    }
    $("turns").append(item);
  }
  if (!after && !page.turns.length) $("turns").append(el("li", "note", "No turns stored."));
  more("more-turns", page.next, () => loadTurns(subject, page.next.log_offset));
}

async function loadFacts(subject, after) {
  const body = { data_subject_id: subject, limit: 20 };
  if (after) body.after = { id: after };
  const page = await api("/v1/records/list", body).catch(failed);
  if (!page || subject !== current) return;
  for (const record of page.records) $("facts").append(fact(record));
  if (!after && !page.records.length) $("facts").append(el("li", "note", "No facts."));
  more("more-facts", page.next, () => loadFacts(subject, page.next.id));
}

function fact(record) {
  const item = el("li", "fact",
    el("div", "", el("span", `status ${record.status}`, record.status), " ",
      el("strong", "", record.predicate), " ", record.statement_preview),
    el("div", "meta", `recorded ${when(record.recorded_at)} · from ${record.source_role}`
      + ` · id ${record.id}`));
  const evidence = el("div", "evidence");
  const history = el("div", "history");
  const button = el("button", "", "History");
  button.type = "button";
  button.addEventListener("click", () => loadHistory(record.id, history));
  item.append(evidence, button, history);
  loadEvidence(record.id, evidence);
  return item;
}

async function loadEvidence(id, into) {
  try {
    const citation = await api("/v1/citations/resolve", { id });
    for (const quote of citation.evidence) {
      into.append(el("div", "quote", quote.quote),
        el("div", "meta", `${quote.role} at offset ${quote.log_offset}, ${when(quote.occurred_at)}`
          + (quote.authored_by ? ` · authored by ${quote.authored_by}` : "")));
    }
    if (!citation.evidence.length) into.append(el("div", "note", "No evidence kept."));
  } catch (refused) {
    into.append(el("div", "refusal", refused.message));
  }
}

function range(interval) {
  return `${when(interval.from)} – ${interval.until ? when(interval.until) : "open"}`;
}

async function loadHistory(id, into) {
  into.replaceChildren();
  try {
    const history = await api("/v1/records/history", { id });
    into.append(el("div", "", `valid ${range(history.current.valid)}; believed `
      + range(history.current.known)));
    if (history.retraction) {
      const r = history.retraction;
      into.append(el("div", "", `retracted ${when(r.retracted_at)}`
        + (r.replacement_record_id ? `; corrected by ${r.replacement_record_id}` : "")));
    }
    for (const version of history.previous) {
      into.append(el("div", "meta", `earlier version: valid ${range(version.valid)};`
        + ` believed ${range(version.known)}`));
    }
    if (!history.previous.length && !history.retraction) {
      into.append(el("div", "note", "No earlier versions."));
    }
  } catch (refused) {
    into.append(el("div", "refusal", refused.message));
  }
}

async function loadSegments(subject, after) {
  const body = { data_subject_id: subject };
  if (after) body.after = after;
  const page = await api("/v1/inspect/segments", body).catch(failed);
  if (!page || subject !== current) return;
  for (const segment of page.segments) {
    $("segments").append(el("li", "",
      el("div", "meta", `level ${segment.level} · offsets ${segment.from_offset}–`
        + `${segment.to_offset} · ${segment.covered} turns`),
      el("div", "summary", segment.summary)));
  }
  if (!after && !page.segments.length) $("segments").append(el("li", "note", "No segments."));
  more("more-segments", page.next, () => loadSegments(subject, page.next.id));
}

// ---- passage search (within the open subject, else the whole project)

async function search(event) {
  event.preventDefault();
  const body = { question: $("question").value, limit: 10 };
  if (current) body.data_subject_id = current;
  $("passages").replaceChildren();
  $("search-note").textContent = "";
  try {
    const page = await api("/v1/passages/search", body);
    for (const passage of page.passages) {
      $("passages").append(el("li", "",
        el("div", "meta", `${passage.role} · ${when(passage.occurred_at)} · similarity `
          + passage.similarity.toFixed(3)),
        el("div", "text", passage.preview)));
    }
    $("search-note").textContent = page.passages.length
      ? `${page.passages.length} found (${page.build_state})` : "Nothing found.";
  } catch (refused) {
    $("search-note").textContent = refused.message;
  }
}

document.addEventListener("DOMContentLoaded", () => {
  $("signin-form").addEventListener("submit", signIn);
  $("signout").addEventListener("click", () => signOut(""));
  $("open-form").addEventListener("submit", (event) => {
    event.preventDefault();
    openSubject($("subject-id").value);
  });
  $("search-form").addEventListener("submit", search);
  if (sessionStorage.getItem(TOKEN_KEY)) show();
});
