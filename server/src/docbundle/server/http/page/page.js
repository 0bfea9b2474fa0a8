// docbundle's operator page: the libraries, the server's request figures, and a search shown exactly as
// the model receives it. No framework, no external asset. Text from bundles only ever goes through
// textContent, never HTML. The API key lives in this variable only: never in a URL, a cookie or storage,
// so it is gone with the tab (or at once with "Forget key").
"use strict";

const PROTOCOL_VERSION = "2025-06-18";
let apiKey = null;
let nextId = 1;
let refreshTimer = null;
let refreshing = false;
let versionsOf = new Map(); // library id -> its versions (default first), from the last table
let previous = null; // the last request figures: { at (ms), counts: Map(row name -> requests) }

const $ = (id) => document.getElementById(id);

function headers(extra) {
  const h = Object.assign({}, extra);
  if (apiKey !== null) h["Authorization"] = "Bearer " + apiKey;
  return h;
}

class NeedKey extends Error {}

async function send(path, init) {
  const response = await fetch(path, Object.assign({ credentials: "omit", cache: "no-store" }, init));
  if (response.status === 401) throw new NeedKey(await problem(response));
  if (!response.ok) throw new Error(await problem(response));
  return response;
}

async function request(path, init) {
  return (await send(path, init)).json();
}

async function problem(response) {
  let text = response.status + " " + response.statusText;
  try {
    const body = await response.json();
    if (body && body.error && body.error.message) text = body.error.message;
    else if (body && body.message) text = body.message;
  } catch (_) { /* not JSON */ }
  const retry = response.headers.get("Retry-After");
  return retry ? text + " (retry in " + retry + " s)" : text;
}

function askForKey(message) {
  apiKey = null;
  stopRefresh();
  $("main").hidden = true;
  $("forget-key").hidden = true;
  $("key-form").hidden = false;
  $("key-error").textContent = message || "";
  $("status").textContent = "An API key is needed.";
  $("key").focus();
}

function forgetKey() {
  $("libraries").tBodies[0].replaceChildren();
  $("requests").tBodies[0].replaceChildren();
  $("library").replaceChildren();
  $("answer").textContent = "";
  $("result").replaceChildren();
  $("sources").replaceChildren();
  $("metrics-text").textContent = "";
  $("metrics-section").hidden = true;
  previous = null;
  askForKey("");
}

function age(seconds) {
  if (seconds === null || seconds === undefined) return "";
  if (seconds < 120) return Math.round(seconds) + " s";
  if (seconds < 7200) return Math.round(seconds / 60) + " min";
  if (seconds < 172800) return Math.round(seconds / 3600) + " h";
  return Math.round(seconds / 86400) + " d";
}

function cell(row, text, className) {
  const td = document.createElement("td");
  td.textContent = text === null || text === undefined ? "" : String(text);
  if (className) td.className = className;
  row.appendChild(td);
}

function option(select, value, label) {
  const item = document.createElement("option");
  item.value = value;
  item.textContent = label;
  select.appendChild(item);
}

async function loadLibraries() {
  const filter = $("filter").value.trim();
  const query = filter ? "?q=" + encodeURIComponent(filter) : "";
  const data = await request("/ui/libraries" + query, { headers: headers({ Accept: "application/json" }) });
  const body = $("libraries").tBodies[0];
  const rows = [];
  const select = $("library");
  const chosen = select.options.length ? select.value : null; // null: nothing chosen yet
  select.replaceChildren();
  option(select, "", "all libraries");
  versionsOf = new Map();
  for (const lib of data.libraries) {
    const row = document.createElement("tr");
    cell(row, lib.id);
    cell(row, lib.name);
    cell(row, lib.version);
    cell(row, lib.checked ? lib.buildId : "not checked yet");
    cell(row, age(lib.ageSeconds), "num");
    cell(row, lib.documents, "num");
    cell(row, lib.vectors ? "yes" : "no");
    cell(row, lib.reason ? lib.health + ": " + lib.reason : lib.health, lib.health === "failed" ? "failed" : "");
    rows.push(row);
    option(select, lib.id, lib.id);
    versionsOf.set(lib.id, lib.versions || [lib.version]);
  }
  body.replaceChildren(...rows);
  // A refresh keeps what the person chose ("" is every library); the first load picks the first library.
  const kept = chosen === "" || versionsOf.has(chosen);
  select.value = kept ? chosen : (data.libraries.length ? data.libraries[0].id : "");
  showVersions();
  $("libraries-note").textContent =
    data.shown < data.matched
      ? "Showing " + data.shown + " of " + data.matched + " matching libraries (" + data.total + " in all): filter to narrow."
      : data.matched + " of " + data.total + " libraries.";
  $("status").textContent = "Serving " + data.total + " libraries.";
  // A key (or none) that works: nothing asks for one, and an earlier refusal is no longer shown.
  $("key-form").hidden = true;
  $("key-error").textContent = "";
  $("forget-key").hidden = apiKey === null;
  $("main").hidden = false;
}

function showVersions() {
  const select = $("version");
  const chosen = select.value;
  select.replaceChildren();
  option(select, "", "default");
  for (const version of versionsOf.get($("library").value) || []) option(select, version, version);
  select.disabled = $("library").value === "";
  select.value = Array.from(select.options).some((o) => o.value === chosen) ? chosen : "";
}

function seconds(value) {
  if (value === null || value === undefined) return "";
  return value < 1 ? (value * 1000).toPrecision(3) + " ms" : value.toPrecision(3) + " s";
}

function percent(part, whole) {
  return whole > 0 ? part + " (" + ((100 * part) / whole).toFixed(1) + " %)" : String(part);
}

// A row is named by what it counts: the tool of an MCP request, the path of any other (the page's own
// requests: its files, its table, these figures); another label a later server adds is shown after it.
function rowName(labels) {
  const route = labels.route;
  const name = route === undefined || route === "/mcp" ? labels.tool || "" : route;
  const others = Object.keys(labels).filter((k) => k !== "tool" && k !== "route").sort().map((k) => k + "=" + labels[k]);
  return others.length ? name + " (" + others.join(", ") + ")" : name;
}

async function loadRequests() {
  const data = await request("/ui/requests", { headers: headers({ Accept: "application/json" }) });
  const now = performance.now();
  const counts = new Map();
  const rows = [];
  for (const figures of data.tools) {
    const name = rowName(figures.labels);
    counts.set(name, figures.requests);
    const row = document.createElement("tr");
    cell(row, name);
    cell(row, figures.requests, "num");
    let rate = "";
    if (previous !== null && now > previous.at) {
      const before = previous.counts.get(name) || 0;
      rate = (Math.max(0, figures.requests - before) / ((now - previous.at) / 1000)).toFixed(2);
    }
    cell(row, rate, "num");
    cell(row, percent(figures.errors, figures.requests), "num");
    cell(row, percent(figures.clientErrors, figures.requests), "num");
    cell(row, seconds(figures.p50), "num");
    cell(row, seconds(figures.p99), "num");
    rows.push(row);
  }
  $("requests").tBodies[0].replaceChildren(...rows);
  previous = { at: now, counts: counts };
}

function stopRefresh() {
  if (refreshTimer !== null) clearTimeout(refreshTimer);
  refreshTimer = null;
}

function scheduleRefresh() {
  stopRefresh();
  const period = Number($("refresh").value);
  if (period > 0) refreshTimer = setTimeout(() => { if (document.hidden) scheduleRefresh(); else start(); }, period * 1000);
}

function safeHref(url) {
  try {
    const parsed = new URL(url);
    return parsed.protocol === "http:" || parsed.protocol === "https:" ? parsed.href : null;
  } catch (_) {
    return null;
  }
}

// A hit's heading path already starts with its page's title when the page has one heading above it.
function sourceLabel(hit) {
  const path = (hit.headingPath || []).filter((part) => part);
  const parts = path.length && path[0] === hit.title ? path : [hit.title].concat(path);
  return parts.join(" › ");
}

function fact(list, term, text) {
  if (text === null || text === undefined || text === "") return;
  const dt = document.createElement("dt");
  dt.textContent = term;
  const dd = document.createElement("dd");
  dd.textContent = String(text);
  list.append(dt, dd);
}

function showResult(result) {
  const list = $("result");
  fact(list, "mode", result.mode);
  fact(list, "why", result.modeReason);
  if (result.libraryId) fact(list, "library", result.libraryId + " " + result.version + " (build " + result.buildId + ")");
  const routing = result.routing;
  if (routing) {
    fact(list, "libraries", routing.method + ": searched " + routing.searched + " of " + routing.libraries +
      (routing.chosen && routing.chosen.length ? " (" + routing.chosen.join(", ") + ")" : ""));
    fact(list, "chosen because", routing.reason);
  }
  fact(list, "terms", (result.terms || []).join(", "));
  fact(list, "left out", (result.dropped || []).join(", "));
  fact(list, "word match", result.wordMatch);
  fact(list, "hits", (result.hits || []).length + (result.omittedHits ? " (" + result.omittedHits + " more left out to fit)" : ""));
  if (result.stopped) fact(list, "stopped", "the search hit its time budget: these are the hits found by then");
  fact(list, "note", result.message);
  const sources = $("sources");
  for (const hit of result.hits || []) {
    const item = document.createElement("li");
    const score = document.createElement("span");
    score.className = "score";
    score.textContent = typeof hit.score === "number" ? hit.score.toPrecision(3) : "";
    item.appendChild(score);
    const label = sourceLabel(hit);
    const href = safeHref(hit.url);
    const name = document.createElement(href ? "a" : "span");
    name.className = "label";
    name.textContent = label;
    if (href) {
      name.href = href;
      name.rel = "noopener noreferrer";
      name.target = "_blank";
    }
    item.appendChild(name);
    const where = document.createElement("span");
    where.className = "where";
    where.textContent = " (" + hit.libraryId + " " + hit.version + " · " + hit.documentId + ")";
    item.appendChild(where);
    sources.appendChild(item);
  }
}

async function search(event) {
  event.preventDefault();
  const answer = $("answer");
  answer.textContent = "Searching…";
  $("result").replaceChildren();
  $("sources").replaceChildren();
  const args = { query: $("question").value, limit: Number($("limit").value) };
  if ($("library").value) args.libraryId = $("library").value;
  if ($("library").value && $("version").value) args.version = $("version").value;
  if ($("mode").value) args.mode = $("mode").value;
  const message = {
    jsonrpc: "2.0",
    id: nextId++,
    method: "tools/call",
    params: { name: "search_documents", arguments: args },
  };
  try {
    const reply = await request("/mcp", {
      method: "POST",
      headers: headers({
        "Content-Type": "application/json",
        Accept: "application/json, text/event-stream",
        "MCP-Protocol-Version": PROTOCOL_VERSION,
      }),
      body: JSON.stringify(message),
    });
    if (reply.error) {
      answer.textContent = "Error: " + reply.error.message;
      return;
    }
    const result = reply.result || {};
    answer.textContent = (result.content || []).filter((c) => c.type === "text").map((c) => c.text).join("\n");
    if (result.structuredContent && !result.isError) showResult(result.structuredContent);
  } catch (error) {
    if (error instanceof NeedKey) askForKey(error.message);
    else answer.textContent = "Error: " + error.message;
  }
}

// With a key, /metrics cannot be followed as a link (a link sends no Authorization header): its text is
// fetched with the key and shown here instead.
async function showMetrics(event) {
  if (apiKey === null) return;
  event.preventDefault();
  try {
    const response = await send("/metrics", { headers: headers({ Accept: "text/plain" }) });
    $("metrics-text").textContent = await response.text();
    $("metrics-section").hidden = false;
    $("metrics-section").scrollIntoView();
  } catch (error) {
    if (error instanceof NeedKey) askForKey(error.message);
    else $("status").textContent = "Error: " + error.message;
  }
}

async function start() {
  if (refreshing) return;
  refreshing = true;
  try {
    await loadLibraries();
    await loadRequests();
    scheduleRefresh();
  } catch (error) {
    if (error instanceof NeedKey) askForKey(apiKey === null ? "" : error.message);
    else {
      $("status").textContent = "Error: " + error.message;
      scheduleRefresh();
    }
  } finally {
    refreshing = false;
  }
}

document.addEventListener("DOMContentLoaded", () => {
  $("key-form").addEventListener("submit", (event) => {
    event.preventDefault();
    apiKey = $("key").value.trim();
    $("key").value = "";
    start();
  });
  $("forget-key").addEventListener("click", forgetKey);
  $("metrics-link").addEventListener("click", showMetrics);
  $("filter-form").addEventListener("submit", (event) => { event.preventDefault(); start(); });
  $("filter").addEventListener("change", start);
  $("refresh").addEventListener("change", scheduleRefresh);
  $("library").addEventListener("change", showVersions);
  $("search-form").addEventListener("submit", search);
  start();
});
