// The nfltr agent's inspector: the requests through the share, polled once a second, shown as
// text only (textContent: nothing a visitor sent is parsed as markup); replay sends a JSON POST.
"use strict";

let selected = null;
let query = "";

function $(id) { return document.getElementById(id); }

function cells(row, values) {
  for (const value of values) {
    const td = document.createElement("td");
    td.textContent = value === null || value === undefined ? "-" : String(value);
    row.appendChild(td);
  }
}

function headerRows(id, headers) {
  const rows = headers.map(([name, value]) => {
    const row = document.createElement("tr");
    cells(row, [name, value]);
    return row;
  });
  $(id).tBodies[0].replaceChildren(...rows);
}

function bodyText(body) {
  return body.text + (body.truncated ? "\n… (" + body.size + " bytes in all; the rest not kept)" : "");
}

function ms(seconds) { return seconds === null ? null : (seconds * 1000).toFixed(1) + " ms"; }

async function refresh() {
  const response = await fetch("/api/requests?q=" + encodeURIComponent(query));
  if (!response.ok) { return; }
  const data = await response.json();
  $("note").hidden = !data.note;
  $("note").textContent = data.note || "";
  $("count").textContent = data.requests.length + " request(s), share mode " + data.mode;
  const rows = data.requests.map((r) => {
    const row = document.createElement("tr");
    row.dataset.id = String(r.id);
    if (r.replay) { row.classList.add("replay"); }
    if (r.id === selected) { row.classList.add("selected"); }
    cells(row, [r.id, new Date(r.started * 1000).toLocaleTimeString(), r.method, r.target,
      r.status === null ? (r.outcome || "…") : r.status, ms(r.took), r.response_size]);
    row.addEventListener("click", () => { show(r.id).catch(() => {}); });
    return row;
  });
  $("requests").tBodies[0].replaceChildren(...rows);
}

async function show(id) {
  const response = await fetch("/api/requests/" + id);
  if (!response.ok) { return; }
  const r = await response.json();
  selected = id;
  $("detail").hidden = false;
  $("detail-title").textContent = r.method + " " + r.target;
  $("detail-meta").textContent = "#" + r.id + " from " + (r.visitor || "-") + " · status " +
    (r.status === null ? "-" : r.status) + " · first byte " + (ms(r.first_byte) || "-") +
    " · took " + (ms(r.took) || "-") + " · " + (r.outcome || "in flight");
  headerRows("request-headers", r.headers);
  headerRows("response-headers", r.response_headers);
  $("request-body").textContent = bodyText(r.body);
  $("response-body").textContent = bodyText(r.response_body);
  $("frames-pane").hidden = r.outcome !== "switched";
  $("frames-title").textContent = "WebSocket frames: " + r.frame_count.visitor + " from the visitor, " +
    r.frame_count.service + " from the service (the last " + r.frames.length + " listed)";
  const frames = r.frames.map((f) => {
    const row = document.createElement("tr");
    cells(row, [f.from, f.opcode, f.size, ms(f.at)]);
    return row;
  });
  $("frames").tBodies[0].replaceChildren(...frames);
  $("replay-method").value = r.method;
  $("replay-target").value = r.target;
  $("replay-headers").value = r.headers.map(([n, v]) => n + ": " + v).join("\n");
  $("replay-body").value = r.body.text;
  $("replay-result").textContent = "";
}

async function replay(event) {
  event.preventDefault();
  const headers = $("replay-headers").value.split("\n").filter((line) => line.includes(":"))
    .map((line) => [line.slice(0, line.indexOf(":")).trim(), line.slice(line.indexOf(":") + 1).trim()]);
  const response = await fetch("/api/requests/" + selected + "/replay", {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ method: $("replay-method").value, target: $("replay-target").value,
      headers, body: $("replay-body").value }),
  });
  const data = await response.json();
  $("replay-result").textContent = response.ok
    ? "replayed as #" + data.id + ": status " + data.status : "refused: " + data.error;
  await refresh();
}

document.addEventListener("DOMContentLoaded", () => {
  $("filter").addEventListener("input", (event) => { query = event.target.value; refresh(); });
  $("replay-form").addEventListener("submit", (event) => { replay(event).catch(() => {}); });
  refresh();
  window.setInterval(() => { refresh().catch(() => {}); }, 1000);
});
