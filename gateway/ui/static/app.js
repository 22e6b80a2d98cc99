// The status page: polls api/status (the gateway's status JSON, behind the
// same credentials as the page) and redraws. Plain DOM, no framework, no
// build step.
"use strict";

const POLL_MS = 2000;
// Built from origin and path: a page opened as http://user:pass@host/ui/
// may not fetch URLs that carry credentials, relative ones included. The
// browser sends the Basic credentials it already holds for this origin.
const STATUS_URL = location.origin + location.pathname.replace(/[^/]*$/, "") + "api/status";

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v;
    else if (k === "style") e.style.cssText = v;
    else e.setAttribute(k, v);
  }
  for (const c of children) {
    if (c !== null && c !== undefined) e.append(c instanceof Node ? c : String(c));
  }
  return e;
}

function bytes(n) {
  if (!n) return "0 B";
  const u = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(1) : n) + " " + u[i];
}

function duration(s) {
  if (s === undefined || s === null || !isFinite(s)) return "–";
  s = Math.round(s);
  if (s < 60) return s + " s";
  if (s < 3600) return Math.floor(s / 60) + " min " + (s % 60) + " s";
  return Math.floor(s / 3600) + " h " + Math.floor((s % 3600) / 60) + " min";
}

function bar(parts) {
  const total = parts.reduce((a, p) => a + p.value, 0);
  const b = el("div", { class: "bar" });
  if (total > 0) {
    for (const p of parts) {
      b.append(el("span", { class: p.cls, style: "width:" + (100 * p.value / total) + "%", title: p.cls + ": " + p.value }));
    }
  }
  return b;
}

function renderSummary(st) {
  const count = (role, state) => st.nodes.filter(n => n.r === role && n.state === state).length;
  const box = (label, value, id) => el("div", { id: id }, el("div", { class: "num" }, value), el("div", { class: "muted" }, label));
  document.getElementById("summary").replaceChildren(
    box("shard servers alive", count("shard", "alive"), "shards-alive"),
    box("suspect", count("shard", "suspect"), "shards-suspect"),
    box("dead", count("shard", "dead"), "shards-dead"),
    box("gateways", count("gateway", "alive"), "gateways-alive"),
    box("manifests on live servers", st.manifests, "manifests"),
    box("shard files", st.shards, "shard-files"),
  );
}

function renderNodes(st) {
  const nodes = [...st.nodes].sort((a, b) => (a.r + (a.h || a.id)).localeCompare(b.r + (b.h || b.id), undefined, { numeric: true }));
  document.getElementById("nodes").replaceChildren(...nodes.map(n => {
    const card = el("div", { class: "node " + n.state, "data-node": n.id, "data-addr": n.h || "", "data-state": n.state },
      el("div", {}, el("span", { class: "state" }, n.state), " ", el("span", { class: "muted" }, n.r)),
      el("div", { class: "addr" }, n.h || ""),
      el("div", { class: "id" }, n.id));
    const s = n.stats;
    if (s) {
      const cap = s.disk_used_bytes + s.disk_free_bytes;
      card.append(bar([{ cls: "used", value: s.disk_used_bytes }, { cls: "free", value: s.disk_free_bytes }]),
        el("div", { class: "muted" }, bytes(s.disk_used_bytes) + " of " + bytes(cap) + " used · " + s.shards + " shards"));
    } else if (n.error) {
      card.append(el("div", { class: "muted" }, "unreachable: " + n.error));
    }
    return card;
  }));
}

function renderStripes(st) {
  const box = document.getElementById("stripes");
  const s = st.stripes;
  if (!s) {
    box.replaceChildren(el("p", { class: "notice" }, "Stripe health is not reported yet (the repair worker is not running)."));
    return;
  }
  box.dataset.degraded = s.degraded;
  box.replaceChildren(
    bar([{ cls: "healthy", value: s.healthy }, { cls: "degraded", value: s.degraded }]),
    el("div", { class: "legend" },
      el("span", {}, el("i", { style: "background:var(--alive)" }), s.healthy + " healthy"),
      el("span", { id: "stripes-degraded" }, el("i", { style: "background:var(--dead)" }), s.degraded + " degraded")));
}

function renderRepair(st) {
  const box = document.getElementById("repair");
  const r = st.repair;
  if (!r) {
    delete box.dataset.done;
    box.replaceChildren(el("p", { class: "notice", id: "repair-off" }, "Repair worker not running: the cluster reports no repair status."));
    return;
  }
  const total = r.done + r.failed + r.running + r.queued;
  // For tests and scripts reading the DOM.
  Object.assign(box.dataset, { done: r.done, running: r.running, queued: r.queued, failed: r.failed });
  // The worker names methods in detail (pull-rep, push-sur, core, ...);
  // the mix groups them by family.
  const methods = {};
  for (const [name, n] of Object.entries(r.by_method || r.methods || {})) {
    const family = name.split("-")[0].toUpperCase();
    methods[family] = (methods[family] || 0) + n;
  }
  box.replaceChildren(
    bar([{ cls: "done", value: r.done }, { cls: "degraded", value: r.failed }, { cls: "used", value: r.running + r.queued }]),
    el("div", {}, r.done + " of " + total + " repairs done · " + r.running + " running · " + r.queued + " queued · " + r.failed + " failed"),
    el("div", {}, "rate " + bytes(r.rate_bytes_per_sec || 0) + "/s · ETA " + duration(r.eta_seconds) + " · " + bytes(r.bytes_moved || 0) + " moved"),
    r.elapsed_seconds ? el("div", { class: "muted" }, "batch: " + duration(r.elapsed_seconds) + " taken, planner predicted " + duration(r.predicted_seconds)) : null,
    el("h2", {}, "Method mix"),
    bar(["CORE", "PUSH", "PULL"].map(m => ({ cls: m, value: methods[m] || 0 }))),
    el("div", { class: "legend" }, ...["CORE", "PUSH", "PULL"].map(m =>
      el("span", {}, el("i", { style: "background:var(--" + m.toLowerCase() + ")" }), m + " " + (methods[m] || 0)))),
    el("div", { class: "muted" }, Object.entries(r.by_method || r.methods || {}).map(([k, v]) => k + " " + v).join(" · ")));
}

function renderEvents(st) {
  const evs = [...(st.events || [])].reverse();
  const list = document.getElementById("events");
  if (!evs.length) {
    list.replaceChildren(el("li", { class: "notice" }, "No events since this gateway started."));
    return;
  }
  list.replaceChildren(...evs.map(e => el("li", { "data-kind": e.kind },
    el("time", { datetime: e.time }, new Date(e.time).toLocaleTimeString()),
    el("span", { class: "kind" }, e.kind),
    e.detail || "")));
}

async function poll() {
  const conn = document.getElementById("conn");
  try {
    const resp = await fetch(STATUS_URL, { credentials: "same-origin", cache: "no-store" });
    if (!resp.ok) throw new Error(resp.status + " " + resp.statusText);
    const st = await resp.json();
    document.getElementById("gateway").textContent = "gateway " + st.gateway;
    document.getElementById("updated").textContent = "updated " + new Date(st.time).toLocaleTimeString();
    renderSummary(st);
    renderNodes(st);
    renderStripes(st);
    renderRepair(st);
    renderEvents(st);
    conn.textContent = "live";
    conn.className = "badge ok";
  } catch (err) {
    conn.textContent = "no answer: " + err.message;
    conn.className = "badge err";
  }
  setTimeout(poll, POLL_MS);
}

poll();
