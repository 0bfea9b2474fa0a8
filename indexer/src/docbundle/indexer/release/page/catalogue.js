"use strict";
// The catalogue page: every library of status.json, filtered by words, category and state, in the
// browser. Text from the catalogue (data from sites) reaches the DOM through textContent only.
(function () {
  const MAX_ROWS = 1000; // rows drawn at once; the count says how many matched
  const data = JSON.parse(document.getElementById("catalogue-data").textContent);
  const byId = new Map();
  for (const v of data.libraries) {
    let lib = byId.get(v.library);
    if (!lib) {
      lib = { id: v.library, name: v.name, category: v.category || "", description: v.description || "", versions: [] };
      byId.set(v.library, lib);
    }
    if (v.latest) lib.versions.unshift(v); else lib.versions.push(v);
    if (!lib.description && v.description) lib.description = v.description;
  }
  const libraries = [...byId.values()].sort((a, b) => (a.id < b.id ? -1 : 1));
  for (const lib of libraries) {
    lib.text = [lib.id, lib.name, lib.category, lib.description, ...lib.versions.map((v) => v.version)]
      .join(" ").toLowerCase();
  }
  const $ = (id) => document.getElementById(id);
  const categories = [...new Set(libraries.map((l) => l.category).filter(Boolean))].sort();
  for (const c of categories) {
    const option = document.createElement("option");
    option.value = c;
    option.textContent = c;
    $("category").append(option);
  }
  $("bound").textContent = String(data.unavailable_after);
  $("generated").textContent = data.generated_at ? "Checked " + data.generated_at.replace("T", " ").replace("Z", " UTC") + "." : "";

  function age(iso) {
    if (!iso) return "never";
    const seconds = Math.max(0, (Date.now() - Date.parse(iso)) / 1000);
    if (seconds < 3600) return Math.floor(seconds / 60) + " min";
    if (seconds < 172800) return Math.floor(seconds / 3600) + " h";
    return Math.floor(seconds / 86400) + " d";
  }
  function size(n) {
    if (!n) return "";
    const units = ["B", "KiB", "MiB", "GiB"];
    let value = n, i = 0;
    while (value >= 1024 && i < units.length - 1) { value /= 1024; i += 1; }
    return i === 0 ? value + " B" : value.toFixed(1) + " " + units[i];
  }
  function stateText(v) {
    if (v.state === "failed" || v.state === "unavailable") {
      const nights = v.failed_nights === 1 ? "1 night" : v.failed_nights + " nights";
      return v.state + " (" + (v.reason || "error") + ", " + nights + ")";
    }
    return v.state;
  }
  function cell(row, text, className) {
    const td = document.createElement("td");
    if (className) td.className = className;
    td.textContent = text;
    row.append(td);
    return td;
  }
  function draw() {
    const words = $("search").value.toLowerCase().split(/[^\p{L}\p{N}]+/u).filter(Boolean);
    const category = $("category").value;
    const state = $("state").value;
    const shown = libraries.filter((lib) =>
      (!category || lib.category === category) &&
      (!state || lib.versions.some((v) => v.state === state)) &&
      words.every((w) => lib.text.includes(w)));
    const body = document.querySelector("#libraries tbody");
    const rows = [];
    for (const lib of shown.slice(0, MAX_ROWS)) {
      const main = lib.versions[0];
      const row = document.createElement("tr");
      const idCell = cell(row, lib.id, "id");
      if (lib.name && lib.name !== lib.id) {
        const name = document.createElement("span");
        name.className = "name";
        name.textContent = lib.name;
        idCell.append(name);
      }
      cell(row, lib.category);
      cell(row, lib.description);
      cell(row, lib.versions.map((v) => v.version).join(", "));
      const stateCell = cell(row, lib.versions.length === 1 ? stateText(main)
        : lib.versions.map((v) => v.version + ": " + stateText(v)).join("; "), "state-" + main.state);
      if (main.message) stateCell.title = main.message;
      cell(row, age(main.last_success));
      cell(row, size(main.bytes), "num");
      const code = document.createElement("code");
      code.textContent = "docbundle pull " + lib.id;
      cell(row, "").append(code);
      rows.push(row);
    }
    body.replaceChildren(...rows);
    const total = libraries.length;
    let text = "Showing " + rows.length + " of " + total + " libraries.";
    if (shown.length > rows.length) {
      const matching = shown.length === total ? "" : " (" + shown.length + " match)";
      text = "Showing the first " + rows.length + " of " + total + " libraries" + matching + ": search or filter to narrow.";
    }
    $("count").textContent = text;
  }
  $("filters").addEventListener("submit", (event) => event.preventDefault());
  $("search").addEventListener("input", draw);
  $("category").addEventListener("change", draw);
  $("state").addEventListener("change", draw);
  draw();
})();
