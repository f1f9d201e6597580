// The graph viewer: draws /api/v1/graph in columns by kind, follows /api/v1/graph/watch
// (the whole graph, then diffs; the browser resumes with Last-Event-ID), colours by health,
// shows a node's or an edge's conditions and reasons on click, and filters by namespace and
// health (a new watch with the filter). Plain JavaScript, no dependencies.
"use strict";

const COLUMNS = [
  ["ClusterALBInstance", "ALBInstance", "Deployment", "DaemonSet"],
  ["GatewayClass"],
  ["Gateway", "ListenerSet"],
  ["Listener"],
  ["HTTPRoute", "GRPCRoute", "TLSRoute", "TCPRoute", "UDPRoute", "Secret"],
  ["Service", "ServiceWithHealthchecks", "BackendTLSPolicy", "ReferenceGrant"],
  ["EndpointSlice", "ConfigMap"],
];
const NODE_W = 170, NODE_H = 40, COL_GAP = 52, ROW_GAP = 14, PAD = 16;
const SVG = "http://www.w3.org/2000/svg";

const model = { nodes: new Map(), edges: new Map(), version: "", seq: "" };
let selected = null;
let source = null;
const namespaces = new Set();

function column(kind) {
  const i = COLUMNS.findIndex((c) => c.includes(kind));
  return i < 0 ? COLUMNS.length - 1 : i;
}

function colour(health) {
  return getComputedStyle(document.documentElement).getPropertyValue("--" + health).trim() || "#757575";
}

function el(name, attrs, parent) {
  const e = document.createElementNS(SVG, name);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (parent) parent.appendChild(e);
  return e;
}

function layout() {
  const columns = COLUMNS.map(() => []);
  for (const n of model.nodes.values()) columns[column(n.kind)].push(n);
  const place = new Map();
  columns.forEach((nodes, c) => {
    nodes.sort((a, b) => (a.parent || a.id).localeCompare(b.parent || b.id) || a.id.localeCompare(b.id));
    nodes.forEach((n, r) => place.set(n.id, { x: PAD + c * (NODE_W + COL_GAP), y: PAD + r * (NODE_H + ROW_GAP) }));
  });
  const rows = Math.max(1, ...columns.map((c) => c.length));
  return { place, width: PAD * 2 + COLUMNS.length * (NODE_W + COL_GAP), height: PAD * 2 + rows * (NODE_H + ROW_GAP) };
}

function draw() {
  // The title says what is drawn (a console's tab, and how tests follow the page live).
  const failing = [...model.nodes.values()].filter((n) => n.health === "failing").length;
  document.title = `Gateway API graph · ${model.nodes.size} nodes · ${failing} failing · v${model.version}`;
  const canvas = document.getElementById("canvas");
  canvas.textContent = "";
  if (model.nodes.size === 0) {
    canvas.innerHTML = '<div class="empty">Nothing to show (or nothing you may list).</div>';
    return;
  }
  const { place, width, height } = layout();
  const svg = el("svg", { width, height, id: "graph", "data-version": model.version, "data-seq": model.seq }, canvas);
  const edges = el("g", {}, svg);
  for (const e of model.edges.values()) {
    const a = place.get(e.source), b = place.get(e.target);
    if (!a || !b) continue;
    const forward = a.x <= b.x;
    const x1 = forward ? a.x + NODE_W : a.x, y1 = a.y + NODE_H / 2;
    const x2 = forward ? b.x : b.x + NODE_W, y2 = b.y + NODE_H / 2;
    const mid = (x1 + x2) / 2 + (a.x === b.x ? 40 : 0);
    const path = el("path", {
      d: `M${x1},${y1} C${mid},${y1} ${mid},${y2} ${x2},${y2}`,
      class: `edge ${e.health}`, stroke: colour(e.health),
      "data-id": e.id, "data-relation": e.relation, "data-health": e.health,
    }, edges);
    path.addEventListener("click", () => select(e));
    let label = e.relation;
    if (e.weight !== undefined) label += ` w=${e.weight}`;
    if (e.traffic) label += ` ${e.traffic.requestsPerSecond}/s`;
    const t = el("text", { x: mid, y: (y1 + y2) / 2 - 3, class: "edge-label", "text-anchor": "middle" }, edges);
    t.textContent = label;
  }
  for (const n of model.nodes.values()) {
    const p = place.get(n.id);
    const g = el("g", {
      class: `node ${n.health}${n.missing ? " missing" : ""}${selected === n.id ? " selected" : ""}`,
      transform: `translate(${p.x},${p.y})`,
      "data-id": n.id, "data-kind": n.kind, "data-health": n.health,
    }, svg);
    el("rect", { width: NODE_W, height: NODE_H, stroke: colour(n.health) }, g);
    const kind = el("text", { x: 8, y: 15, class: "kind" }, g);
    kind.textContent = n.kind + (n.missing ? " (missing)" : "") + (n.namespace ? ` · ${n.namespace}` : "");
    const name = el("text", { x: 8, y: 31 }, g);
    name.textContent = n.name.length > 26 ? n.name.slice(0, 25) + "…" : n.name;
    const title = el("title", {}, g);
    title.textContent = `${n.id}\n${n.health}${(n.reasons || []).map((r) => "\n" + r).join("")}`;
    g.addEventListener("click", () => select(n));
  }
}

function escape(text) {
  return String(text).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]);
}

function select(item) {
  selected = item.id;
  const d = document.getElementById("details");
  const reasons = (item.reasons || []).map((r) => `<li>${escape(r)}</li>`).join("");
  // An object's own conditions, or a route's per parent.
  const status = item.status || {};
  const conditions = (status.conditions || []).concat(
    (status.parents || []).flatMap((p) =>
      (p.conditions || []).map((c) => Object.assign({}, c, { type: `${c.type} (${p.parentRef.kind || "Gateway"} ${p.parentRef.name})` }))));
  const rows = conditions
    .map((c) => `<tr><td>${escape(c.type)}</td><td>${escape(c.status)}</td><td>${escape(c.reason || "")}</td><td>${escape(c.message || "")}</td></tr>`)
    .join("");
  d.innerHTML =
    `<h2>${escape(item.kind || item.relation)} ${escape(item.name || "")}</h2>` +
    `<p><code>${escape(item.id)}</code></p>` +
    `<p>Health: <b style="color:${colour(item.health)}" id="selected-health">${escape(item.health)}</b></p>` +
    (reasons ? `<ul id="selected-reasons">${reasons}</ul>` : "") +
    (rows ? `<table><tr><th>Condition</th><th>Status</th><th>Reason</th><th>Message</th></tr>${rows}</table>` : "") +
    `<pre>${escape(JSON.stringify(Object.assign({}, item.status, item.traffic ? { traffic: item.traffic } : {}, item.weight !== undefined ? { weight: item.weight } : {}), null, 2))}</pre>`;
  draw();
}

function remember(nodes) {
  let added = false;
  for (const n of nodes) {
    if (n.namespace && !namespaces.has(n.namespace)) {
      namespaces.add(n.namespace);
      added = true;
    }
  }
  if (!added) return;
  const select = document.getElementById("namespace");
  const current = select.value;
  select.innerHTML = '<option value="">all</option>' +
    [...namespaces].sort().map((ns) => `<option>${escape(ns)}</option>`).join("");
  select.value = current;
}

function whole(data, id) {
  model.nodes.clear();
  model.edges.clear();
  for (const { data: n } of data.elements.nodes) model.nodes.set(n.id, n);
  for (const { data: e } of data.elements.edges) model.edges.set(e.id, e);
  model.version = data.version;
  model.seq = id;
  remember(model.nodes.values());
  draw();
}

function patch(diff, id) {
  for (const n of diff.removedNodes) model.nodes.delete(n);
  for (const e of diff.removedEdges) model.edges.delete(e);
  for (const n of [...diff.addedNodes, ...diff.changedNodes]) model.nodes.set(n.id, n);
  for (const e of [...diff.addedEdges, ...diff.changedEdges]) model.edges.set(e.id, e);
  model.version = diff.version;
  model.seq = id;
  remember(diff.addedNodes);
  const item = selected && (model.nodes.get(selected) || model.edges.get(selected));
  if (item) select(item);
  else draw();
}

function connect() {
  if (source) source.close();
  const params = new URLSearchParams();
  const ns = document.getElementById("namespace").value;
  const health = document.getElementById("health").value;
  if (ns) params.set("namespace", ns);
  if (health) params.set("health", health);
  const state = document.getElementById("state");
  source = new EventSource("/api/v1/graph/watch" + (params.toString() ? "?" + params : ""));
  source.addEventListener("graph", (m) => { whole(JSON.parse(m.data), m.lastEventId); state.textContent = `live · version ${model.version}`; });
  source.addEventListener("diff", (m) => { patch(JSON.parse(m.data), m.lastEventId); state.textContent = `live · version ${model.version}`; });
  source.onerror = () => { state.textContent = "reconnecting…"; };
}

document.getElementById("namespace").addEventListener("change", connect);
document.getElementById("health").addEventListener("change", connect);
connect();
