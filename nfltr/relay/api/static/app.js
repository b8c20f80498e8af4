// The nfltr relay's dashboard: live tables from /api/v1/events (server-sent events), key
// management through the API. Every text is put in with textContent: nothing from the relay is
// parsed as markup. Changes carry the session's CSRF token in X-CSRF-Token.
"use strict";

const HISTORY = 60;  // throughput points kept per agent (one a second)
const SVG = "http://www.w3.org/2000/svg";
const history = new Map();  // agent name -> [{t, bytes}]
let csrf = null;

function $(id) { return document.getElementById(id); }

function showError(text) { $("error").textContent = text || ""; }

async function api(method, path, body) {
  const options = { method, headers: {}, credentials: "same-origin" };
  if (method !== "GET") { options.headers["X-CSRF-Token"] = csrf; }
  if (body !== undefined) {
    options.headers["Content-Type"] = "application/json";
    options.body = JSON.stringify(body);
  }
  const response = await fetch(path, options);
  const data = await response.json().catch(() => ({}));
  if (response.status === 401) { window.location.assign("/dashboard"); }
  if (!response.ok) { throw new Error(data.error || ("HTTP " + response.status)); }
  return data;
}

function cell(row, text, className) {
  const td = document.createElement("td");
  td.textContent = text === null || text === undefined ? "-" : String(text);
  if (className) { td.className = className; }
  row.appendChild(td);
  return td;
}

function button(row, label, action) {
  const td = document.createElement("td");
  const b = document.createElement("button");
  b.type = "button";
  b.className = "change";
  b.textContent = label;
  b.addEventListener("click", () => action().catch((e) => showError(e.message)));
  td.appendChild(b);
  row.appendChild(td);
}

function fill(tableId, items, makeRow) {
  const body = $(tableId).tBodies[0];
  const rows = items.map((item) => {
    const row = document.createElement("tr");
    makeRow(row, item);
    return row;
  });
  body.replaceChildren(...rows);
}

function bytes(n) {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i += 1; }
  return (i ? n.toFixed(1) : String(n)) + " " + units[i];
}

function time(posix) { return posix ? new Date(posix * 1000).toISOString().slice(0, 19) + "Z" : "-"; }

function sparkline(name) {
  const points = history.get(name) || [];
  const rates = [];
  for (let i = 1; i < points.length; i += 1) {
    const dt = points[i].t - points[i - 1].t;
    rates.push(dt > 0 ? Math.max(0, points[i].bytes - points[i - 1].bytes) / dt : 0);
  }
  const svg = document.createElementNS(SVG, "svg");
  svg.setAttribute("class", "spark");
  svg.setAttribute("viewBox", "0 0 " + HISTORY + " 24");
  svg.setAttribute("preserveAspectRatio", "none");
  const top = Math.max(1, ...rates);
  const line = document.createElementNS(SVG, "polyline");
  line.setAttribute("points", rates.map((r, i) =>
    (HISTORY - rates.length + i) + "," + (23 - (r / top) * 22).toFixed(1)).join(" "));
  svg.appendChild(line);
  const title = document.createElementNS(SVG, "title");
  title.textContent = rates.length ? bytes(Math.round(rates[rates.length - 1])) + "/s" : "";
  svg.appendChild(title);
  return svg;
}

function snapshot(data) {
  const relay = data.relay;
  $("status").textContent = (relay.ready ? "ready" : "not ready") +
    (relay.draining ? ", draining" : "") + " · nfltr " + relay.version;
  $("agent-count").textContent = "(" + data.agents.length + ")";
  const seen = new Set();
  for (const agent of data.agents) {
    seen.add(agent.name);
    const points = history.get(agent.name) || [];
    points.push({ t: relay.time, bytes: agent.bytes_in + agent.bytes_out });
    while (points.length > HISTORY + 1) { points.shift(); }
    history.set(agent.name, points);
  }
  for (const name of [...history.keys()]) { if (!seen.has(name)) { history.delete(name); } }
  fill("agents", data.agents, (row, a) => {
    row.dataset.agent = a.name;
    cell(row, a.name); cell(row, a.account); cell(row, a.kind); cell(row, a.address);
    cell(row, time(a.connected_since)); cell(row, a.ports.join(" "));
    cell(row, a.shares.join(" ")); cell(row, a.sessions, "num");
    cell(row, bytes(a.bytes_in), "num"); cell(row, bytes(a.bytes_out), "num");
    cell(row, a.rtt === null ? null : (a.rtt * 1000).toFixed(1) + " ms", "num");
    cell(row, a.data_links, "num");
    cell(row, "").appendChild(sparkline(a.name));
    button(row, "Kick", () => api("POST", "/api/v1/agents/" + encodeURIComponent(a.name) + "/kick"));
  });
  $("session-count").textContent = "(" + data.sessions.length + ")";
  fill("sessions", data.sessions, (row, s) => {
    cell(row, s.agent); cell(row, s.link); cell(row, s.kind); cell(row, s.to); cell(row, s.from);
    cell(row, s.age.toFixed(0) + " s", "num");
    cell(row, bytes(s.bytes_to_agent), "num"); cell(row, bytes(s.bytes_from_agent), "num");
  });
  fill("shares", data.shares, (row, s) => {
    cell(row, s.name); cell(row, s.account); cell(row, s.agent); cell(row, s.mode);
    cell(row, s.url); cell(row, s.policy.allow.join(" ") || "anyone");
    cell(row, s.policy.auth.join(" ") || "none");
    cell(row, s.lease.lease_time + " s");
  });
}

async function loadAccounts() {
  const data = await api("GET", "/api/v1/accounts");
  fill("accounts", data.accounts, (row, a) => { cell(row, a.name); cell(row, time(a.created_at)); });
}

async function loadKeys() {
  const data = await api("GET", "/api/v1/keys");
  fill("keys", data.keys, (row, k) => {
    row.dataset.keyid = k.keyid;
    cell(row, k.keyid); cell(row, k.account); cell(row, k.label);
    cell(row, time(k.created_at)); cell(row, k.revoked_at ? time(k.revoked_at) : null);
    if (k.revoked_at) { cell(row, ""); return; }
    button(row, "Revoke", async () => {
      await api("DELETE", "/api/v1/keys/" + encodeURIComponent(k.keyid));
      await loadKeys();
    });
  });
  const ssh = await api("GET", "/api/v1/ssh-keys");
  fill("ssh-keys", ssh.ssh_keys, (row, k) => {
    cell(row, k.fingerprint); cell(row, k.account); cell(row, k.algorithm); cell(row, k.label);
    cell(row, time(k.created_at));
    button(row, "Remove", async () => {
      await api("DELETE", "/api/v1/ssh-keys/" + encodeURIComponent(k.fingerprint));
      await loadKeys();
    });
  });
}

async function loadTokens() {
  const data = await api("GET", "/api/v1/admin-tokens");
  fill("admin-tokens", data.admin_tokens, (row, t) => {
    row.dataset.tokenid = t.tokenid;
    cell(row, t.tokenid); cell(row, t.read_only ? "read-only" : "read-write"); cell(row, t.label);
    cell(row, time(t.created_at)); cell(row, t.revoked_at ? time(t.revoked_at) : null);
    if (t.revoked_at) { cell(row, ""); return; }
    button(row, "Revoke", async () => {
      await api("DELETE", "/api/v1/admin-tokens/" + encodeURIComponent(t.tokenid));
      await loadTokens();
    });
  });
}

function onSubmit(id, action) {
  $(id).addEventListener("submit", (event) => {
    event.preventDefault();
    const form = new FormData(event.target);
    action(form).then(() => { event.target.reset(); showError(""); })
      .catch((e) => showError(e.message));
  });
}

async function start() {
  const me = await api("GET", "/api/v1/session");
  csrf = me.csrf;
  $("whoami").textContent = "token " + me.tokenid + (me.read_only ? " (read-only)" : "");
  document.body.classList.toggle("read-only", me.read_only);
  const events = new EventSource("/api/v1/events");
  events.addEventListener("snapshot", (event) => snapshot(JSON.parse(event.data)));
  events.addEventListener("error", () => { $("status").textContent = "reconnecting…"; });
  onSubmit("account-form", async (form) => {
    await api("POST", "/api/v1/accounts", { name: form.get("name") });
    await loadAccounts();
  });
  onSubmit("key-form", async (form) => {
    const label = form.get("label");
    const made = await api("POST", "/api/v1/keys",
      { account: form.get("account"), label: label ? label : null });
    $("new-key-text").textContent = made.key;
    $("new-key").hidden = false;
    await loadKeys();
  });
  onSubmit("ssh-form", async (form) => {
    await api("POST", "/api/v1/ssh-keys", { account: form.get("account"), key: form.get("key") });
    await loadKeys();
  });
  onSubmit("token-form", async (form) => {
    const label = form.get("label");
    const made = await api("POST", "/api/v1/admin-tokens",
      { label: label ? label : null, read_only: form.get("read_only") === "on" });
    $("new-token-text").textContent = made.token;
    $("new-token").hidden = false;
    await loadTokens();
  });
  $("drain").addEventListener("click", () => {
    if (window.confirm("Drain this relay? It stops once its sessions finished.")) {
      api("POST", "/api/v1/relay/drain").catch((e) => showError(e.message));
    }
  });
  $("logout").addEventListener("click", async () => {
    await fetch("/dashboard/logout", { method: "POST", headers: { "X-CSRF-Token": csrf } });
    window.location.assign("/dashboard");
  });
  await loadAccounts();
  await loadKeys();
  if (!me.read_only) { await loadTokens(); }
}

document.addEventListener("DOMContentLoaded", () => { start().catch((e) => showError(e.message)); });
