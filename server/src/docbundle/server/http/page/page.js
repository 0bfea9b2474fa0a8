// docbundle's operator page: the libraries, and a search shown exactly as the model receives it.
// No framework, no external asset. Text from bundles only ever goes through textContent, never HTML.
// The API key lives in this variable only: never in a URL, a cookie or storage, so it is gone with the tab.
"use strict";

const PROTOCOL_VERSION = "2025-06-18";
let apiKey = null;
let nextId = 1;

const $ = (id) => document.getElementById(id);

function headers(extra) {
  const h = Object.assign({}, extra);
  if (apiKey !== null) h["Authorization"] = "Bearer " + apiKey;
  return h;
}

class NeedKey extends Error {}

async function request(path, init) {
  const response = await fetch(path, Object.assign({ credentials: "omit", cache: "no-store" }, init));
  if (response.status === 401) throw new NeedKey(await problem(response));
  if (!response.ok) throw new Error(await problem(response));
  return response.json();
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
  $("main").hidden = true;
  $("key-form").hidden = false;
  $("key-error").textContent = message || "";
  $("status").textContent = "An API key is needed.";
  $("key").focus();
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

async function loadLibraries() {
  const filter = $("filter").value.trim();
  const query = filter ? "?q=" + encodeURIComponent(filter) : "";
  const data = await request("/ui/libraries" + query, { headers: headers({ Accept: "application/json" }) });
  const body = $("libraries").tBodies[0];
  body.replaceChildren();
  const select = $("library");
  const chosen = select.value;
  select.replaceChildren();
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
    body.appendChild(row);
    const option = document.createElement("option");
    option.value = lib.id;
    option.textContent = lib.id;
    select.appendChild(option);
  }
  if (chosen) select.value = chosen;
  $("libraries-note").textContent =
    data.shown < data.matched
      ? "Showing " + data.shown + " of " + data.matched + " matching libraries (" + data.total + " in all): filter to narrow."
      : data.matched + " of " + data.total + " libraries.";
  $("status").textContent = "Serving " + data.total + " libraries.";
  $("key-form").hidden = true;
  $("main").hidden = false;
}

function safeHref(url) {
  try {
    const parsed = new URL(url);
    return parsed.protocol === "http:" || parsed.protocol === "https:" ? parsed.href : null;
  } catch (_) {
    return null;
  }
}

async function search(event) {
  event.preventDefault();
  const answer = $("answer");
  const sources = $("sources");
  answer.textContent = "Searching…";
  sources.replaceChildren();
  const message = {
    jsonrpc: "2.0",
    id: nextId++,
    method: "tools/call",
    params: { name: "search_documents", arguments: { libraryId: $("library").value, query: $("question").value } },
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
    const hits = (result.structuredContent && result.structuredContent.hits) || [];
    for (const hit of hits) {
      const item = document.createElement("li");
      const label = [hit.title].concat(hit.headingPath || hit.heading_path || []).join(" › ");
      const href = safeHref(hit.url);
      if (href) {
        const link = document.createElement("a");
        link.href = href;
        link.rel = "noopener noreferrer";
        link.target = "_blank";
        link.textContent = label;
        item.appendChild(link);
      } else {
        item.textContent = label;
      }
      const where = document.createElement("span");
      where.textContent = " (" + (hit.documentId || hit.document_id) + ")";
      item.appendChild(where);
      sources.appendChild(item);
    }
  } catch (error) {
    if (error instanceof NeedKey) askForKey(error.message);
    else answer.textContent = "Error: " + error.message;
  }
}

async function start() {
  try {
    await loadLibraries();
  } catch (error) {
    if (error instanceof NeedKey) askForKey(apiKey === null ? "" : error.message);
    else $("status").textContent = "Error: " + error.message;
  }
}

document.addEventListener("DOMContentLoaded", () => {
  $("key-form").addEventListener("submit", (event) => {
    event.preventDefault();
    apiKey = $("key").value.trim();
    $("key").value = "";
    start();
  });
  $("filter-form").addEventListener("submit", (event) => { event.preventDefault(); start(); });
  $("filter").addEventListener("change", start);
  $("search-form").addEventListener("submit", search);
  start();
});
