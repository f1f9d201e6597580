// The graph viewer. It draws /api/v1/graph with Cytoscape.js in dagre's layered layout (left
// to right: instances and classes, Gateways, listeners, routes, backends, endpoints) and
// follows /api/v1/graph/watch (the whole graph, then diffs; the browser resumes with
// Last-Event-ID). Changes are applied in place: the user's pan, zoom, selection and the
// positions drawn stay, and a new node is put beside its neighbour. The namespace, kinds and
// health are the server's filters (a new watch); Find narrows on the page to the matches and
// their chains. A view over GATE nodes is not drawn until narrowed (or asked for anyway, then in
// columns by kind). Edges carry the traffic overlay (requests/s, 5xx share, p99); the side
// panel explains an element's health, up the chain from a route to its listener, Gateway and
// GatewayClass. PNG and SVG export what is drawn. The filters live in the address, so a view
// can be shared. `window.fairlead` is for tests and the console.
"use strict";

// Kinds left to right; the columns of the large view and the kinds menu.
const COLUMNS = [
  ["ClusterALBInstance", "ALBInstance", "Deployment", "DaemonSet"],
  ["GatewayClass"],
  ["Gateway", "ListenerSet"],
  ["Listener"],
  ["HTTPRoute", "GRPCRoute", "TLSRoute", "TCPRoute", "UDPRoute", "Secret"],
  ["Service", "ServiceWithHealthchecks", "BackendTLSPolicy", "ReferenceGrant"],
  ["EndpointSlice", "ConfigMap"],
];
const KINDS = COLUMNS.flat();
// Nodes drawn without asking for a narrower view (dagre lays this many out in a second or two).
const GATE = 1000;
// Relations that point against the flow of traffic: laid out reversed, arrow kept on the real
// target.
const FLIPPED = new Set(["parentRef", "gatewayClass"]);
const NODE_W = 184, NODE_H = 46;

const model = { nodes: new Map(), edges: new Map(), version: "", seq: "" };
const view = { selected: null, anyway: false, relayout: true };
const namespaces = new Set();
let source = null;
const $ = (id) => document.getElementById(id);

// The health colours of the page's style, read once (every element asks for one).
const COLOURS = Object.fromEntries(["healthy", "degraded", "failing", "unknown"].map((health) =>
  [health, getComputedStyle(document.documentElement).getPropertyValue("--" + health).trim()]));

function colour(health) {
  return COLOURS[health] || "#757575";
}

const STYLE = [
  { selector: "node", style: {
    shape: "round-rectangle", width: NODE_W, height: NODE_H, "background-color": "#fff",
    "border-width": 2.5, "border-color": "data(colour)", label: "data(label)", "text-wrap": "wrap",
    "text-max-width": NODE_W - 8, "text-valign": "center", "text-halign": "center", "font-size": 11,
    color: "#212121", "min-zoomed-font-size": 5 } },
  { selector: "node.missing", style: { "border-style": "dashed", "background-color": "#fff8f8" } },
  { selector: "node.found", style: { "underlay-color": "#fdd835", "underlay-opacity": 0.6, "underlay-padding": 6 } },
  { selector: "node:selected", style: { "background-color": "#e3f2fd", "border-width": 4 } },
  { selector: "edge", style: {
    width: "data(width)", "line-color": "data(colour)", "curve-style": "bezier",
    "target-arrow-shape": "triangle", "target-arrow-color": "data(colour)", "arrow-scale": 0.8,
    label: "data(label)", "font-size": 9, color: "#424242", "text-background-color": "#fff",
    "text-background-opacity": 0.85, "text-background-padding": 1, "min-zoomed-font-size": 7,
    opacity: 0.85 } },
  { selector: "edge.flipped", style: {
    "target-arrow-shape": "none", "source-arrow-shape": "triangle", "source-arrow-color": "data(colour)" } },
  { selector: "edge.broken", style: { "line-style": "dashed" } },
  { selector: "edge:selected", style: { "overlay-color": "#1565c0", "overlay-opacity": 0.2, "overlay-padding": 4 } },
];

const cy = cytoscape({ container: $("cy"), style: STYLE, minZoom: 0.02, maxZoom: 4 });

// ---- What is drawn ----------------------------------------------------------------------

// An edge's ends as drawn: [from, to] along the flow of traffic.
function flow(e) {
  return FLIPPED.has(e.relation) ? [e.target, e.source] : [e.source, e.target];
}

function number(x) {
  return x >= 100 ? Math.round(x).toString() : x >= 10 ? x.toFixed(1) : x.toFixed(2);
}

// The traffic overlay's words: "12.5 rps · 1.2% 5xx · p99 34 ms".
function rate(t) {
  const parts = [`${number(t.requestsPerSecond)} rps`];
  if (t.errorRatio !== undefined) parts.push(`${number(t.errorRatio * 100)}% 5xx`);
  if (t.p99Ms !== undefined) parts.push(`p99 ${number(t.p99Ms)} ms`);
  return parts.join(" · ");
}

function edgeLabel(e) {
  const words = [];
  if (e.accepted === false) words.push(`not accepted${e.reason ? ": " + e.reason : ""}`);
  if (e.relation === "mirror") words.push("mirror");
  if (e.weight !== undefined) words.push(`w=${e.weight}`);
  if (e.traffic) words.push(rate(e.traffic));
  return words.join(" · ");
}

function short(name) {
  return name.length > 28 ? name.slice(0, 27) + "…" : name;
}

function nodeElement(n, found) {
  const where = n.namespace ? ` · ${n.namespace}` : "";
  return {
    group: "nodes",
    data: { id: n.id, label: `${n.kind}${n.missing ? " (missing)" : ""}${where}\n${short(n.name)}`,
            health: n.health, colour: colour(n.health), kind: n.kind },
    classes: [n.missing ? "missing" : "", found ? "found" : ""].join(" ").trim(),
  };
}

function edgeElement(e) {
  const [from, to] = flow(e);
  const rps = e.traffic ? e.traffic.requestsPerSecond : 0;
  return {
    group: "edges",
    data: { id: e.id, source: from, target: to, health: e.health, colour: colour(e.health),
            relation: e.relation, label: edgeLabel(e), width: 1.5 + Math.min(6, 2 * Math.log10(1 + rps)) },
    classes: [FLIPPED.has(e.relation) ? "flipped" : "", e.accepted === false || e.health === "failing" ? "broken" : ""]
      .join(" ").trim(),
  };
}

// The nodes Find keeps: every match, what it sends to (downstream) and what it hangs from
// (upstream), along the drawn direction. `null` keeps everything.
function found() {
  const q = $("search").value.trim().toLowerCase();
  if (!q) return { keep: null, hits: new Set() };
  const hits = new Set([...model.nodes.keys()].filter((id) => id.toLowerCase().includes(q)));
  const down = new Map(), up = new Map();
  for (const e of model.edges.values()) {
    const [from, to] = flow(e);
    (down.get(from) || down.set(from, []).get(from)).push(to);
    (up.get(to) || up.set(to, []).get(to)).push(from);
  }
  const keep = new Set(hits);
  for (const next of [down, up]) {
    const stack = [...hits], seen = new Set(hits);
    while (stack.length) {
      for (const n of next.get(stack.pop()) || []) {
        if (!seen.has(n)) { seen.add(n); keep.add(n); stack.push(n); }
      }
    }
  }
  return { keep, hits };
}

// Draws the model: in place (what changed, what came and went), laid out again when the
// view changed.
function render() {
  const { keep, hits } = found();
  const nodes = [...model.nodes.values()].filter((n) => !keep || keep.has(n.id));
  const ids = new Set(nodes.map((n) => n.id));
  const edges = [...model.edges.values()].filter((e) => ids.has(e.source) && ids.has(e.target));
  const failing = [...model.nodes.values()].filter((n) => n.health === "failing").length;
  const gated = nodes.length > GATE && !view.anyway;
  document.title = `Gateway API graph · ${model.nodes.size} nodes · ${failing} failing · ` +
    `${gated ? 0 : nodes.length} drawn · v${model.version}`;
  $("gate").classList.toggle("shown", gated);
  $("empty").textContent = nodes.length === 0 && model.version
    ? "Nothing to show (or nothing you may list) with these filters." : "";
  if (gated) {
    const routes = nodes.filter((n) => n.kind.endsWith("Route")).length;
    $("gate-count").textContent = `This view has ${nodes.length} nodes (${routes} routes) and ${edges.length} edges.`;
    cy.elements().remove();
    view.relayout = true;
    return;
  }
  const edgeIds = new Set(edges.map((e) => e.id));
  const added = [];
  cy.batch(() => {
    cy.elements().forEach((ele) => {
      if (!(ele.isNode() ? ids.has(ele.id()) : edgeIds.has(ele.id()))) ele.remove();
    });
    for (const n of nodes) {
      const element = nodeElement(n, hits.has(n.id));
      const drawn = cy.getElementById(n.id);
      if (drawn.nonempty()) {
        drawn.data(element.data);
        drawn.classes(element.classes);
      } else {
        added.push(element);
      }
    }
    if (!view.relayout) placeBeside(added, edges);
    cy.add(added);
    for (const e of edges) {
      const element = edgeElement(e);
      const drawn = cy.getElementById(e.id);
      if (drawn.nonempty()) {
        drawn.data({ health: element.data.health, colour: element.data.colour, label: element.data.label, width: element.data.width });
        drawn.classes(element.classes);
      } else {
        cy.add(element);
      }
    }
  });
  if (view.relayout && nodes.length) layout(nodes.length);
}

// Puts nodes that arrive in a drawn graph beside a drawn neighbour (right of what feeds them,
// left of what they feed), below whatever already stands there, so nothing drawn moves.
function placeBeside(added, edges) {
  const standing = cy.nodes().map((n) => n.position());
  const bounds = cy.nodes().nonempty() ? cy.nodes().boundingBox() : { x2: 0, y1: 0 };
  const clashes = (at) => standing.some((p) => Math.abs(p.x - at.x) < NODE_W + 8 && Math.abs(p.y - at.y) < NODE_H + 8);
  for (const element of added) {
    const id = element.data.id;
    let at = null;
    for (const e of edges) {
      const [from, to] = flow(e);
      const other = from === id ? to : to === id ? from : null;
      const drawn = other && cy.getElementById(other);
      if (drawn && drawn.nonempty()) {
        const p = drawn.position();
        at = { x: p.x + (other === from ? 1 : -1) * (NODE_W + 120), y: p.y };
        break;
      }
    }
    at = at || { x: bounds.x2 + NODE_W, y: bounds.y1 };
    while (clashes(at)) at.y += NODE_H + 12;
    element.position = at;
    standing.push(at);
  }
}

// Dagre's layered layout up to GATE nodes; columns by kind above.
function layout(count) {
  view.relayout = false;
  const options = count <= GATE
    ? { name: "dagre", rankDir: "LR", nodeSep: 14, rankSep: 120, edgeSep: 8, fit: true, padding: 24, animate: false }
    : { name: "preset", positions: columns(), fit: true, padding: 24, animate: false };
  cy.layout(options).run();
}

function columns() {
  const rows = COLUMNS.map(() => 0);
  const place = {};
  const nodes = cy.nodes().sort((a, b) => a.id().localeCompare(b.id()));
  nodes.forEach((n) => {
    const c = Math.max(0, COLUMNS.findIndex((kinds) => kinds.includes(n.data("kind"))));
    place[n.id()] = { x: c * (NODE_W + 120), y: rows[c]++ * (NODE_H + 14) };
  });
  return (node) => place[node.id()];
}

// ---- The side panel ---------------------------------------------------------------------

function escape(text) {
  return String(text).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]);
}

// `group/kind/namespace/name[/section]` in parts.
function parts(id) {
  const [group, kind, namespace, name, section] = id.split("/");
  return { group, kind, namespace, name, section };
}

function named(id) {
  const n = model.nodes.get(id);
  if (n) return `${n.kind} ${n.namespace ? n.namespace + "/" : ""}${n.name}`;
  const p = parts(id);
  return `${p.kind} ${p.namespace ? p.namespace + "/" : ""}${p.name}${p.section ? "/" + p.section : ""}`;
}

function conditionLine(c) {
  return `${c.type}=${c.status}${c.reason ? " " + c.reason : ""}${c.message ? ": " + c.message : ""}`;
}

function nodeStep(n) {
  const lines = [...(n.reasons || [])];
  for (const c of (n.status && n.status.conditions) || []) lines.push(conditionLine(c));
  return { health: n.health, title: named(n.id), lines };
}

// An edge's step: for a parentRef, the route's own word on that parent (the conditions of its
// status for the parentRef that are not True), then the edge's reasons not said already.
function edgeStep(e) {
  const lines = [];
  const route = model.nodes.get(e.source);
  if (e.relation === "parentRef" && route && route.status) {
    const parent = model.nodes.get(e.target);
    const parentName = parent && parent.kind === "Listener" ? parts(parent.parent || "").name : parts(e.target).name;
    for (const p of route.status.parents || []) {
      if (p.parentRef && p.parentRef.name === parentName) {
        for (const c of p.conditions || []) if (c.status !== "True") lines.push(conditionLine(c));
      }
    }
  }
  if (e.accepted === false && !lines.some((l) => l.startsWith("Accepted=False"))) {
    lines.push(`Accepted=False${e.reason ? " " + e.reason : ""}`);
  }
  for (const r of e.reasons || []) if (!lines.some((l) => l.includes(r))) lines.push(r);
  return { health: e.health, title: `${e.relation}: ${named(e.source)} → ${named(e.target)}`, lines };
}

// From a listener (or a Gateway, a ListenerSet) up to its Gateway and GatewayClass.
function upward(id, steps) {
  const seen = new Set();
  let node = model.nodes.get(id);
  while (node && !seen.has(node.id)) {
    seen.add(node.id);
    steps.push(nodeStep(node));
    let next = node.parent;
    if (!next) {
      const up = [...model.edges.values()].find((e) => e.source === node.id &&
        (e.relation === "gatewayClass" || (e.relation === "parentRef" && node.kind === "ListenerSet")));
      next = up && up.target;
    }
    node = next && model.nodes.get(next);
  }
}

// Why an element has its health: the element, then up the chain (route → listener → Gateway →
// GatewayClass) for a parentRef, or the failing parentRefs and backends of a node.
function chain(item) {
  const steps = [];
  if (item.relation) {
    steps.push(edgeStep(item));
    if (item.relation === "parentRef") upward(item.target, steps);
    else if (model.nodes.has(item.target)) steps.push(nodeStep(model.nodes.get(item.target)));
    return steps;
  }
  steps.push(nodeStep(item));
  for (const e of model.edges.values()) {
    if (e.source !== item.id || e.health === "healthy") continue;
    steps.push(edgeStep(e));
    if (e.relation === "parentRef") upward(e.target, steps);
    else if (model.nodes.has(e.target)) steps.push(nodeStep(model.nodes.get(e.target)));
  }
  return steps;
}

function trafficTable(t) {
  const row = (name, value) => `<tr><th>${name}</th><td>${value}</td></tr>`;
  return `<table id="selected-traffic">${row("requests/s", number(t.requestsPerSecond))}` +
    (t.errorRatio !== undefined ? row("5xx share", `${number(t.errorRatio * 100)}%`) : "") +
    (t.p99Ms !== undefined ? row("p99", `${number(t.p99Ms)} ms`) : "") + "</table>";
}

function show(item) {
  const reasons = (item.reasons || []).map((r) => `<li>${escape(r)}</li>`).join("");
  const status = item.status || {};
  const conditions = (status.conditions || []).concat(
    (status.parents || []).flatMap((p) =>
      (p.conditions || []).map((c) => Object.assign({}, c, { type: `${c.type} (${p.parentRef.kind || "Gateway"} ${p.parentRef.name})` }))));
  const rows = conditions
    .map((c) => `<tr><td>${escape(c.type)}</td><td>${escape(c.status)}</td><td>${escape(c.reason || "")}</td><td>${escape(c.message || "")}</td></tr>`)
    .join("");
  const why = item.health === "healthy" && item.accepted !== false ? [] : chain(item);
  const steps = why.map((s) =>
    `<li><span class="dot" style="background:${colour(s.health)}"></span><b>${escape(s.title)}</b> — ${escape(s.health)}` +
    (s.lines.length ? `<ul>${s.lines.map((l) => `<li>${escape(l)}</li>`).join("")}</ul>` : "") + "</li>").join("");
  const facts = ["rule", "weight", "port", "accepted", "reason"]
    .filter((k) => item[k] !== undefined).map((k) => `${k}: <b>${escape(item[k])}</b>`).join(" · ");
  $("details").innerHTML =
    `<h2>${escape(item.relation ? item.relation : item.kind)} ${escape(item.relation ? named(item.source) + " → " + named(item.target) : item.name)}</h2>` +
    `<p><code>${escape(item.id)}</code></p>` +
    `<p>Health: <b style="color:${colour(item.health)}" id="selected-health">${escape(item.health)}</b></p>` +
    (facts ? `<p>${facts}</p>` : "") +
    (item.traffic ? trafficTable(item.traffic) : "") +
    (reasons ? `<ul id="selected-reasons">${reasons}</ul>` : "") +
    (steps ? `<h3>Why</h3><ol id="why">${steps}</ol>` : "") +
    (rows ? `<h3>Conditions</h3><table id="selected-conditions"><tr><th>Condition</th><th>Status</th><th>Reason</th><th>Message</th></tr>${rows}</table>` : "") +
    (Object.keys(status).length ? `<pre>${escape(JSON.stringify(status, null, 2))}</pre>` : "");
}

function select(id) {
  view.selected = id;
  const item = model.nodes.get(id) || model.edges.get(id);
  if (!item) return;
  cy.$(":selected").unselect();
  cy.getElementById(id).select();
  show(item);
}

cy.on("tap", "node, edge", (event) => select(event.target.id()));

// ---- Export -----------------------------------------------------------------------------

function exportPng() {
  return cy.png({ full: true, scale: 2, bg: "#ffffff", output: "blob" });
}

// What is drawn as SVG: the same positions, colours, arrows and labels.
function exportSvg() {
  const box = cy.elements().boundingBox();
  const pad = 24;
  const out = [`<svg xmlns="http://www.w3.org/2000/svg" width="${Math.ceil(box.w + 2 * pad)}" height="${Math.ceil(box.h + 2 * pad)}" ` +
    `viewBox="${box.x1 - pad} ${box.y1 - pad} ${box.w + 2 * pad} ${box.h + 2 * pad}">`,
    "<style>text{font:11px system-ui,sans-serif;fill:#212121}.label{font-size:9px;fill:#424242}</style><defs>"];
  for (const health of ["healthy", "degraded", "failing", "unknown"]) {
    out.push(`<marker id="arrow-${health}" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse">` +
      `<path d="M0,0 L10,5 L0,10 z" fill="${colour(health)}"/></marker>`);
  }
  out.push(`</defs><rect x="${box.x1 - pad}" y="${box.y1 - pad}" width="${box.w + 2 * pad}" height="${box.h + 2 * pad}" fill="#fff"/>`);
  cy.edges().forEach((e) => {
    const s = e.sourceEndpoint(), t = e.targetEndpoint();
    const control = e.controlPoints();
    const d = control && control.length === 1
      ? `M${s.x},${s.y} Q${control[0].x},${control[0].y} ${t.x},${t.y}` : `M${s.x},${s.y} L${t.x},${t.y}`;
    const marker = e.hasClass("flipped") ? "marker-start" : "marker-end";
    out.push(`<path class="edge" data-id="${escape(e.id())}" d="${d}" fill="none" stroke="${e.data("colour")}" ` +
      `stroke-width="${e.data("width")}"${e.hasClass("broken") ? ' stroke-dasharray="6 3"' : ""} ${marker}="url(#arrow-${e.data("health")})"/>`);
    if (e.data("label")) {
      const m = e.midpoint();
      out.push(`<text class="label" x="${m.x}" y="${m.y - 3}" text-anchor="middle">${escape(e.data("label"))}</text>`);
    }
  });
  cy.nodes().forEach((n) => {
    const p = n.position();
    const [kind, name] = n.data("label").split("\n");
    out.push(`<g class="node" data-id="${escape(n.id())}" transform="translate(${p.x - NODE_W / 2},${p.y - NODE_H / 2})">` +
      `<rect width="${NODE_W}" height="${NODE_H}" rx="6" fill="${n.hasClass("missing") ? "#fff8f8" : "#fff"}" stroke="${n.data("colour")}" ` +
      `stroke-width="2.5"${n.hasClass("missing") ? ' stroke-dasharray="5 3"' : ""}/>` +
      `<text x="${NODE_W / 2}" y="19" text-anchor="middle">${escape(kind)}</text>` +
      `<text x="${NODE_W / 2}" y="34" text-anchor="middle">${escape(name || "")}</text></g>`);
  });
  out.push("</svg>");
  return out.join("\n");
}

function download(blob, name) {
  const a = document.createElement("a");
  a.href = URL.createObjectURL(blob);
  a.download = name;
  a.click();
  setTimeout(() => URL.revokeObjectURL(a.href), 1000);
}

$("png").addEventListener("click", () => download(exportPng(), "gateway-api-graph.png"));
$("svg").addEventListener("click", () =>
  download(new Blob([exportSvg()], { type: "image/svg+xml" }), "gateway-api-graph.svg"));
$("fit").addEventListener("click", () => cy.fit(undefined, 24));
$("relayout").addEventListener("click", () => { view.relayout = true; render(); });
$("draw-anyway").addEventListener("click", () => { view.anyway = true; view.relayout = true; render(); });

// ---- Filters and the watch --------------------------------------------------------------

function kinds() {
  const boxes = [...document.querySelectorAll("#kinds input")];
  const checked = boxes.filter((b) => b.checked).map((b) => b.value);
  return checked.length === boxes.length ? [] : checked;
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
  const menu = $("namespace");
  const current = menu.value;
  if (current) namespaces.add(current);
  menu.innerHTML = '<option value="">all</option>' +
    [...namespaces].sort().map((ns) => `<option>${escape(ns)}</option>`).join("");
  menu.value = current;
}

function whole(data, id) {
  model.nodes.clear();
  model.edges.clear();
  for (const { data: n } of data.elements.nodes) model.nodes.set(n.id, n);
  for (const { data: e } of data.elements.edges) model.edges.set(e.id, e);
  model.version = data.version;
  model.seq = id;
  remember(model.nodes.values());
  render();
  if (view.selected) select(view.selected);
}

function patch(diff, id) {
  for (const n of diff.removedNodes) model.nodes.delete(n);
  for (const e of diff.removedEdges) model.edges.delete(e);
  for (const n of [...diff.addedNodes, ...diff.changedNodes]) model.nodes.set(n.id, n);
  for (const e of [...diff.addedEdges, ...diff.changedEdges]) model.edges.set(e.id, e);
  model.version = diff.version;
  model.seq = id;
  remember(diff.addedNodes);
  render();
  if (view.selected && (model.nodes.has(view.selected) || model.edges.has(view.selected))) select(view.selected);
}

// The filters in the address (so a view can be shared and survives a reload).
function filters() {
  const params = new URLSearchParams();
  if ($("namespace").value) params.set("namespace", $("namespace").value);
  if (kinds().length) params.set("kinds", kinds().join(","));
  if ($("health").value) params.set("health", $("health").value);
  return params;
}

function remembered() {
  const params = filters();
  if ($("search").value.trim()) params.set("find", $("search").value.trim());
  history.replaceState(null, "", params.toString() ? "?" + params : location.pathname);
}

function connect() {
  if (source) source.close();
  view.relayout = true;
  remembered();
  const params = filters();
  const state = $("state");
  state.textContent = "connecting…";
  source = new EventSource("/api/v1/graph/watch" + (params.toString() ? "?" + params : ""));
  source.addEventListener("graph", (m) => { whole(JSON.parse(m.data), m.lastEventId); state.textContent = `live · version ${model.version}`; });
  source.addEventListener("diff", (m) => { patch(JSON.parse(m.data), m.lastEventId); state.textContent = `live · version ${model.version}`; });
  source.onerror = () => { state.textContent = "reconnecting…"; };
}

function start() {
  const asked = new URLSearchParams(location.search);
  const wanted = new Set((asked.get("kinds") || "").split(",").filter(Boolean));
  $("kinds").innerHTML = KINDS.map((k) =>
    `<label><input type="checkbox" value="${k}"${wanted.size === 0 || wanted.has(k) ? " checked" : ""}>${k}</label>`).join("");
  $("kinds-summary").textContent = wanted.size ? [...wanted].join(", ") : "all";
  if (asked.get("namespace")) {
    namespaces.add(asked.get("namespace"));
    $("namespace").innerHTML += `<option>${escape(asked.get("namespace"))}</option>`;
    $("namespace").value = asked.get("namespace");
  }
  $("health").value = asked.get("health") || "";
  $("search").value = asked.get("find") || "";
  $("namespace").addEventListener("change", connect);
  $("health").addEventListener("change", connect);
  $("kinds").addEventListener("change", () => {
    $("kinds-summary").textContent = kinds().length ? kinds().join(", ") : "all";
    connect();
  });
  let typing = null;
  $("search").addEventListener("input", () => {
    clearTimeout(typing);
    typing = setTimeout(() => { view.relayout = true; remembered(); render(); }, 250);
  });
  connect();
}

window.fairlead = {
  cy, model, select, exportPng, exportSvg,
  // The health node or edge `id` is drawn with (null when it is not drawn).
  drawn: (id) => { const e = cy.getElementById(id); return e.nonempty() ? e.data("health") : null; },
};
start();
