// The kubesched web UI: a view of the cluster kept live by the API server's watches, a pod's
// scheduling explanation, events and YAML, and the usual actions. Every request goes to the
// regular API paths with the bearer token, so RBAC judges the page as it judges kubectl.
"use strict";

const TOKEN_KEY = "kubesched-token";
const FIELD_MANAGER = "kubesched-ui";
const ZONE_LABEL = "topology.kubernetes.io/zone";
const SHORT = {
  TaintToleration: "Taint", NodeAffinity: "NodeAff", NodeResourcesFit: "Fit", NodeResourcesBalancedAllocation: "Balanced",
  ImageLocality: "Image", InterPodAffinity: "PodAff", PodTopologySpread: "Spread", DynamicResources: "DRA", VolumeBinding: "Volume",
};
const SUFFIXES = {
  n: 1e-9, u: 1e-6, m: 1e-3, "": 1, k: 1e3, M: 1e6, G: 1e9, T: 1e12, P: 1e15, E: 1e18,
  Ki: 1024, Mi: 1024 ** 2, Gi: 1024 ** 3, Ti: 1024 ** 4, Pi: 1024 ** 5, Ei: 1024 ** 6,
};

const state = {
  token: sessionStorage.getItem(TOKEN_KEY) || "",
  nodes: new Map(), pods: new Map(), deployments: new Map(),
  synced: new Set(), selected: null, tab: "explanation", renderTimer: null, firstRender: null,
  // Replica counts typed but not yet applied, by Deployment: the table is redrawn on every watch
  // event, and must not throw away what is being typed.
  replicaDrafts: new Map(),
  // The node cards drawn: the zones and nodes they were drawn for, each card's HTML and element.
  zoneLayout: null, cards: new Map(), cardElements: new Map(),
  // The scenario run the panel shows (its latest status), the poll's timer, the uploaded file's name.
  run: null, runTimer: null, scenarioName: null,
};
const $ = (id) => document.getElementById(id);

// --- the API ------------------------------------------------------------------------------------
class ApiError extends Error {
  constructor(status, message) { super(message); this.status = status; }
}

function headers(extra) {
  const out = { Accept: "application/json", ...extra };
  if (state.token) out.Authorization = `Bearer ${state.token}`;
  return out;
}

async function api(method, path, body, contentType) {
  const init = { method, headers: headers(body === undefined ? {} : { "Content-Type": contentType || "application/json" }) };
  if (body !== undefined) init.body = typeof body === "string" ? body : JSON.stringify(body);
  const response = await fetch(path, init);
  const text = await response.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch (e) { data = { message: text }; }
  if (!response.ok) throw new ApiError(response.status, (data && data.message) || `${method} ${path}: HTTP ${response.status}`);
  return data;
}

const key = (obj) => `${obj.metadata.namespace ? obj.metadata.namespace + "/" : ""}${obj.metadata.name}`;
// Names in byte order, as kubectl sorts them (and far cheaper than localeCompare on 10,000 pods).
const byName = (a, b) => (a.metadata.name < b.metadata.name ? -1 : a.metadata.name > b.metadata.name ? 1 : 0);

// List, then watch from the list's resourceVersion; relist after a 410 or a broken stream. The
// list comes from `listPath` when given: the server's pods trimmed to what the view draws (a fifth
// of the bytes to fetch and parse); the watch then sends whole objects, which the view reads alike.
async function keepSynced(name, path, map, listPath) {
  for (;;) {
    try {
      const started = performance.now();
      const list = await api("GET", listPath || path);
      map.clear();
      for (const item of list.items) map.set(key(item), item);
      performance.measure(`list ${name}`, { start: started, end: performance.now() });
      state.synced.add(name);
      scheduleRender();
      await watch(path, list.metadata.resourceVersion, map);
    } catch (e) {
      if (e instanceof ApiError && e.status === 401) { showLogin("The token was refused."); return; }
      setConnection("error", String(e.message || e));
      await new Promise((resolve) => setTimeout(resolve, 1000));
    }
  }
}

async function watch(path, resourceVersion, map) {
  let rv = resourceVersion;
  for (;;) {
    const response = await fetch(`${path}?watch=true&allowWatchBookmarks=true&resourceVersion=${rv}`, { headers: headers() });
    if (!response.ok) throw new ApiError(response.status, `watch ${path}: HTTP ${response.status}`);
    setConnection("live", "live");
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let newline;
      while ((newline = buffer.indexOf("\n")) >= 0) {
        const line = buffer.slice(0, newline);
        buffer = buffer.slice(newline + 1);
        if (!line.trim()) continue;
        const event = JSON.parse(line);
        if (event.type === "ERROR") throw new ApiError(event.object.code || 500, event.object.message || "watch error");
        rv = event.object.metadata.resourceVersion || rv;
        if (event.type === "DELETED") map.delete(key(event.object));
        else if (event.type !== "BOOKMARK") map.set(key(event.object), event.object);
        if (event.type !== "BOOKMARK") scheduleRender();
      }
    }
  }
}

// --- quantities and allocation ------------------------------------------------------------------
function quantity(text) {
  if (text === undefined || text === null) return 0;
  const match = /^([+-]?[0-9.]+)(?:([eE][+-]?[0-9]+)|([a-zA-Z]*))$/.exec(String(text));
  if (!match) return 0;
  const number = parseFloat(match[1]);
  if (match[2]) return number * 10 ** parseInt(match[2].slice(1), 10);
  return number * (SUFFIXES[match[3] || ""] ?? 1);
}

// What a pod requests, as the scheduler counts it: its containers (sidecars included), or its
// largest init container when that is more, plus the pod overhead.
const requestsOf = new WeakMap();

function podRequests(pod) {
  let found = requestsOf.get(pod);
  if (found === undefined) requestsOf.set(pod, found = computeRequests(pod));
  return found;
}

function computeRequests(pod) {
  const spec = pod.spec || {};
  const sum = { cpu: 0, memory: 0 };
  const add = (target, c) => {
    const requests = (c.resources && c.resources.requests) || {};
    target.cpu += quantity(requests.cpu);
    target.memory += quantity(requests.memory);
  };
  for (const c of spec.containers || []) add(sum, c);
  const sidecars = { cpu: 0, memory: 0 };
  for (const c of spec.initContainers || []) {
    if (c.restartPolicy === "Always") { add(sum, c); add(sidecars, c); continue; }
    const one = { cpu: 0, memory: 0 };
    add(one, c);
    sum.cpu = Math.max(sum.cpu, one.cpu + sidecars.cpu);
    sum.memory = Math.max(sum.memory, one.memory + sidecars.memory);
  }
  const overhead = spec.overhead || {};
  sum.cpu += quantity(overhead.cpu);
  sum.memory += quantity(overhead.memory);
  return sum;
}

const active = (pod) => !["Succeeded", "Failed"].includes((pod.status || {}).phase);

function formatCpu(cores) { return cores >= 10 || Number.isInteger(cores) ? `${+cores.toFixed(1)}` : `${Math.round(cores * 1000)}m`; }
function formatBytes(bytes) {
  const units = ["", "Ki", "Mi", "Gi", "Ti"];
  let i = 0;
  while (bytes >= 1024 && i < units.length - 1) { bytes /= 1024; i += 1; }
  return `${+bytes.toFixed(1)}${units[i]}`;
}

function escapeHtml(text) {
  return String(text ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
}

// --- the cluster view ---------------------------------------------------------------------------
function scheduleRender() {
  if (state.renderTimer !== null) return;
  state.renderTimer = setTimeout(() => { state.renderTimer = null; render(); }, 50);
}

function render() {
  if (!(state.synced.has("nodes") && state.synced.has("pods"))) return;
  const started = performance.now();
  const byNode = new Map();
  const pending = [];
  for (const pod of state.pods.values()) {
    if (!active(pod)) continue;
    const node = (pod.spec || {}).nodeName;
    if (node) {
      if (!byNode.has(node)) byNode.set(node, []);
      byNode.get(node).push(pod);
    } else pending.push(pod);
  }
  renderZones(byNode);
  renderPending(pending);
  renderDeployments();
  const bound = state.pods.size - pending.length;
  $("summary").textContent = `${state.nodes.size} nodes, ${state.pods.size} pods (${pending.length} pending)`;
  $("main").hidden = false;
  performance.measure("render", { start: started, end: performance.now() });
  if (state.firstRender === null) {
    // The first render is done once the browser has laid out and painted it: the frame after the
    // next animation frame.
    state.firstRender = started;
    requestAnimationFrame(() => setTimeout(() => {
      document.body.dataset.firstRenderMs = String(Math.round(performance.now()));
      document.body.dataset.bound = String(bound);
    }, 0));
  }
  if (state.selected && !$("pod-view").hidden) refreshPodStatus();
}

// The node cards: drawn whole when the zones or their nodes change, else only the cards whose
// HTML changed are replaced (a watch event touches a node or two, not a thousand).
function renderZones(byNode) {
  const zones = new Map();
  for (const node of state.nodes.values()) {
    const zone = (node.metadata.labels || {})[ZONE_LABEL] || "(no zone)";
    if (!zones.has(zone)) zones.set(zone, []);
    zones.get(zone).push(node);
  }
  const names = [...zones.keys()].sort();
  for (const zone of names) zones.get(zone).sort(byName);
  const layout = names.map((zone) => `${zone}\u0000${zones.get(zone).map((n) => n.metadata.name).join("\u0000")}`).join("\u0001");
  const cards = new Map();
  for (const node of state.nodes.values()) cards.set(node.metadata.name, nodeCard(node, byNode.get(node.metadata.name) || []));
  if (layout !== state.zoneLayout) {
    const parts = names.map((zone) => `<div class="zone" data-zone="${escapeHtml(zone)}"><h3>${escapeHtml(zone)} `
      + `<span class="count">${zones.get(zone).length} node(s)</span></h3>`
      + `<div class="zone-nodes">${zones.get(zone).map((n) => cards.get(n.metadata.name)).join("")}</div></div>`);
    $("zones").innerHTML = parts.join("") || '<p class="empty">No nodes.</p>';
    state.cardElements = new Map([...$("zones").querySelectorAll(".node")].map((el) => [el.dataset.node, el]));
    setWidths($("zones"));
  } else {
    for (const [name, html] of cards) {
      if (state.cards.get(name) === html) continue;
      const template = document.createElement("template");
      template.innerHTML = html;
      const fresh = template.content.firstElementChild;
      setWidths(fresh);
      state.cardElements.get(name).replaceWith(fresh);
      state.cardElements.set(name, fresh);
    }
  }
  state.zoneLayout = layout;
  state.cards = cards;
}

// Bar widths through the CSSOM: the page's Content-Security-Policy allows no inline style attribute.
function setWidths(root) {
  for (const fill of root.querySelectorAll(".fill")) fill.style.width = `${fill.dataset.pct}%`;
}

function nodeCard(node, pods) {
  const name = node.metadata.name;
  const status = node.status || {};
  const allocatable = status.allocatable || status.capacity || {};
  const used = { cpu: 0, memory: 0 };
  for (const pod of pods) {
    const r = podRequests(pod);
    used.cpu += r.cpu;
    used.memory += r.memory;
  }
  const cordoned = Boolean((node.spec || {}).unschedulable);
  const ready = ((status.conditions || []).find((c) => c.type === "Ready") || {}).status;
  const taints = ((node.spec || {}).taints || []).map((t) => `${t.key}${t.value ? "=" + t.value : ""}:${t.effect}`);
  const badges = [cordoned ? '<span class="badge cordon" data-state="cordoned">SchedulingDisabled</span>' : ""];
  if (ready !== undefined && ready !== "True") badges.push('<span class="badge notready">NotReady</span>');
  const chips = pods.sort(byName).map(podChip).join("");
  return `<div class="node${cordoned ? " cordoned" : ""}" data-node="${escapeHtml(name)}">`
    + `<div class="node-head"><span class="node-name">${escapeHtml(name)}</span>${badges.join("")}</div>`
    + (taints.length ? `<div class="taints" title="taints">${taints.map(escapeHtml).join(", ")}</div>` : "")
    + bar("cpu", "CPU", used.cpu, quantity(allocatable.cpu), formatCpu)
    + bar("memory", "Mem", used.memory, quantity(allocatable.memory), formatBytes)
    + bar("pods", "Pods", pods.length, quantity(allocatable.pods), (v) => String(Math.round(v)))
    + `<div class="node-pods">${chips}</div>`
    + `<div class="node-actions"><button type="button" data-action="${cordoned ? "uncordon" : "cordon"}" data-target="${escapeHtml(name)}">`
    + `${cordoned ? "Uncordon" : "Cordon"}</button><button type="button" data-action="drain" data-target="${escapeHtml(name)}">Drain</button></div>`
    + "</div>";
}

function bar(cls, label, used, total, format) {
  const pct = total > 0 ? Math.min(100, (100 * used) / total) : 0;
  return `<div class="bar ${cls}" title="${label}: ${format(used)} of ${format(total)} allocatable (${pct.toFixed(0)}%)">`
    + `<span>${label}</span><span class="track"><span class="fill" data-pct="${pct.toFixed(1)}"></span></span>`
    + `<span class="value">${format(used)} / ${format(total)}</span></div>`;
}

function podChip(pod) {
  const k = key(pod);
  const phase = (pod.status || {}).phase;
  const cls = pod.metadata.deletionTimestamp ? " terminating" : phase === "Running" ? "" : " waiting";
  return `<span class="pod${cls}" data-pod="${escapeHtml(k)}" title="${escapeHtml(k)} (${escapeHtml(phase || "Pending")})">${escapeHtml(pod.metadata.name)}</span>`;
}

function schedulingMessage(pod) {
  const condition = ((pod.status || {}).conditions || []).find((c) => c.type === "PodScheduled");
  if (!condition) return "waiting for the scheduler";
  return condition.status === "False" ? `${condition.reason || ""}: ${condition.message || ""}` : "scheduled";
}

function renderPending(pods) {
  pods.sort((a, b) => key(a).localeCompare(key(b)));
  $("pending-count").textContent = `(${pods.length})`;
  $("pending").innerHTML = pods.map((pod) => `<li data-pod="${escapeHtml(key(pod))}"><strong>${escapeHtml(key(pod))}</strong>`
    + `<div class="reason">${escapeHtml(schedulingMessage(pod))}</div></li>`).join("") || '<li class="empty">None.</li>';
}

function renderDeployments() {
  const rows = [...state.deployments.values()].sort((a, b) => key(a).localeCompare(key(b))).map((d) => {
    const k = key(d);
    const status = d.status || {};
    const desired = (d.spec || {}).replicas ?? 1;
    const value = state.replicaDrafts.get(k) ?? String(desired);
    return `<tr data-deployment="${escapeHtml(k)}"><td>${escapeHtml(k)}</td><td>${status.readyReplicas || 0}/${desired} ready</td>`
      + `<td><input type="number" min="0" value="${escapeHtml(value)}" data-draft="${escapeHtml(k)}" aria-label="replicas of ${escapeHtml(k)}">`
      + ` <button type="button" data-action="scale" data-target="${escapeHtml(k)}">Scale</button></td></tr>`;
  });
  $("deployments").innerHTML = rows.length ? `<tr><th>Deployment</th><th>Ready</th><th>Replicas</th></tr>${rows.join("")}`
    : '<tr><td class="empty">None.</td></tr>';
}

function setConnection(stateName, text) {
  const el = $("connection");
  el.dataset.state = stateName;
  el.textContent = text;
}

function toast(message, error) {
  const el = $("toast");
  el.textContent = message;
  el.className = error ? "toast error" : "toast";
  el.hidden = false;
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => { el.hidden = true; }, 5000);
}

// --- the pod view -------------------------------------------------------------------------------
function splitKey(k) {
  const [namespace, name] = k.split("/");
  return { namespace, name };
}

async function openPod(k) {
  state.selected = k;
  delete $("pod-view").dataset.node;
  $("apply-view").hidden = true;
  $("scenario-view").hidden = true;
  $("pod-view").hidden = false;
  $("pod-title").textContent = k;
  refreshPodStatus();
  await showTab(state.tab);
}

function refreshPodStatus() {
  const pod = state.pods.get(state.selected);
  if (!pod) { $("pod-status").textContent = "deleted"; return; }
  const node = (pod.spec || {}).nodeName;
  // A pending pod that got a node has a new latest attempt: show it.
  const shown = $("pod-view").dataset.node;
  $("pod-view").dataset.node = node || "";
  if (shown !== undefined && shown !== (node || "") && state.tab === "explanation") showTab("explanation");
  $("pod-status").textContent = `${(pod.status || {}).phase || "Pending"}${node ? ` on ${node}` : ` - ${schedulingMessage(pod)}`}`;
}

async function showTab(tab) {
  state.tab = tab;
  $("deployments").addEventListener("input", (event) => {
    const draft = event.target.dataset.draft;
    if (draft) state.replicaDrafts.set(draft, event.target.value);
  });
  for (const button of document.querySelectorAll(".tabs button")) button.classList.toggle("active", button.dataset.tab === tab);
  for (const name of ["explanation", "events", "yaml"]) $(`tab-${name}`).hidden = name !== tab;
  const { namespace, name } = splitKey(state.selected);
  const target = $(`tab-${tab}`);
  target.textContent = "loading...";
  try {
    if (tab === "explanation") {
      const doc = await api("GET", `/apis/kubesched.io/v1alpha1/namespaces/${encodeURIComponent(namespace)}/explanations/${encodeURIComponent(name)}`);
      target.innerHTML = renderExplanation(doc);
    } else if (tab === "events") {
      const selector = encodeURIComponent(`involvedObject.name=${name},involvedObject.kind=Pod`);
      const list = await api("GET", `/api/v1/namespaces/${encodeURIComponent(namespace)}/events?fieldSelector=${selector}`);
      target.innerHTML = renderEvents(list.items);
    } else {
      const pod = await api("GET", `/api/v1/namespaces/${encodeURIComponent(namespace)}/pods/${encodeURIComponent(name)}`);
      delete pod.metadata.managedFields;
      target.textContent = jsyaml.dump(pod, { noRefs: true, lineWidth: 120 });
    }
  } catch (e) {
    target.innerHTML = `<p class="error">${escapeHtml(e.message)}</p>`;
  }
}

function renderEvents(events) {
  if (!events.length) return '<p class="empty">No events.</p>';
  events.sort((a, b) => String(a.lastTimestamp || a.eventTime || "").localeCompare(String(b.lastTimestamp || b.eventTime || "")));
  return '<table class="events"><tr><th>Type</th><th>Reason</th><th>Count</th><th>From</th><th>Message</th></tr>'
    + events.map((e) => `<tr><td>${escapeHtml(e.type)}</td><td>${escapeHtml(e.reason)}</td><td>${e.count || 1}</td>`
      + `<td>${escapeHtml(e.reportingComponent || (e.source || {}).component || "")}</td><td>${escapeHtml(e.message)}</td></tr>`).join("")
    + "</table>";
}

// The explanation as `kubesched explain` prints it: the last attempt; when the pod went to the
// node an earlier preemption nominated, that attempt too, with its candidates and victims.
function renderExplanation(doc) {
  const attempts = doc.attempts;
  const last = attempts[attempts.length - 1];
  let html = renderAttempt(last, doc.attemptCount, doc.attemptCount);
  if (attempts.length > 1) {
    const earlier = attempts[0];
    const nominated = earlier.preemption && earlier.preemption.node;
    if (nominated && last.chosen === nominated) {
      html += `<p class="explain-line">${escapeHtml(nominated)} is the node preemption nominated: the scheduler checks a pod's `
        + "nominated node first and, when it fits, looks at no other node.</p>";
    }
    html += "<hr>" + renderAttempt(earlier, doc.attemptCount, null);
  }
  return html;
}

function renderAttempt(attempt, count, index) {
  const nodes = attempt.nodes;
  const feasible = nodes.filter((n) => n.filter.passed);
  const filtered = nodes.filter((n) => !n.filter.passed && n.filter.plugin);
  const chosen = attempt.chosen;
  const which = index ? `attempt ${index} of ${count}` : `an earlier attempt of ${count}`;
  let html = `<p class="explain-line explain-head"><strong>Pod ${escapeHtml(attempt.pod)}: ${chosen ? `scheduled to ${escapeHtml(chosen)}` : "no node fits"}</strong>`
    + ` (${which}; ${feasible.length} feasible of ${nodes.length} nodes)</p>`;
  if (attempt.preFilter) {
    html += `<p class="explain-line">PreFilter ${escapeHtml(attempt.preFilter.plugin)}: ${escapeHtml(attempt.preFilter.code)}: ${escapeHtml(attempt.preFilter.reasons.join(", "))}</p>`;
  }
  if (feasible.length && !feasible.some((n) => "total" in n)) {
    html += `<p class="explain-line">Passed every filter: ${escapeHtml(feasible.map((n) => n.name).join(", "))} (not scored: with one feasible node, `
      + "or no Score plugin, the scheduler skips scoring)</p>";
  } else if (feasible.length) {
    html += scoreTable(feasible, chosen);
  }
  if (filtered.length) html += filteredList(filtered);
  if (attempt.preemption) html += `<pre class="yaml preemption">${escapeHtml(preemptionLines(attempt.preemption).join("\n"))}</pre>`;
  return html;
}

function scoreTable(feasible, chosen) {
  const seen = [];
  for (const node of feasible) for (const plugin of Object.keys(node.scores || {})) if (!seen.includes(plugin)) seen.push(plugin);
  const zero = seen.filter((p) => feasible.every((n) => ((n.scores || {})[p] || {}).weighted === 0 || !(n.scores || {})[p]));
  const shown = seen.filter((p) => !zero.includes(p));
  const ordered = [...feasible].sort((a, b) => (a.name !== chosen) - (b.name !== chosen) || (b.total || 0) - (a.total || 0) || a.name.localeCompare(b.name));
  let html = `<table class="explain"><tr><th></th><th>NODE</th>${shown.map((p) => `<th title="${escapeHtml(p)}">${escapeHtml(SHORT[p] || p)}</th>`).join("")}<th>TOTAL</th></tr>`;
  for (const node of ordered) {
    const cells = shown.map((p) => {
      const s = (node.scores || {})[p];
      return `<td title="raw ${s ? s.raw : "-"}, normalised ${s ? s.normalized : "-"}, weight ${s ? s.weight : "-"}">${s ? s.weighted : "-"}</td>`;
    });
    html += `<tr class="${node.name === chosen ? "chosen" : ""}" data-node="${escapeHtml(node.name)}"><td>${node.name === chosen ? "*" : ""}</td>`
      + `<td>${escapeHtml(node.name)}</td>${cells.join("")}<td>${node.total ?? ""}</td></tr>`;
  }
  html += "</table>";
  const legend = shown.filter((p) => SHORT[p]).map((p) => `${SHORT[p]} = ${p}`);
  if (legend.length) html += `<p class="legend">Columns: ${escapeHtml(legend.join("; "))} (weighted)</p>`;
  if (zero.length) html += `<p class="legend">Scored 0 on every node: ${escapeHtml(zero.join(", "))}</p>`;
  return html;
}

function filteredList(filtered) {
  const groups = new Map();
  for (const n of filtered) {
    const k = `${n.filter.plugin}\u0000${n.filter.reasons.join(", ")}`;
    if (!groups.has(k)) groups.set(k, []);
    groups.get(k).push(n.name);
  }
  const rows = [...groups.entries()].sort((a, b) => b[1].length - a[1].length || a[0].localeCompare(b[0])).map(([k, names]) => {
    const [plugin, reason] = k.split("\u0000");
    const listed = names.slice(0, 3).join(", ") + (names.length > 3 ? ", ..." : "");
    return `<li class="filter-reason">${names.length} node(s) (${escapeHtml(listed)}) <strong>${escapeHtml(plugin)}</strong>: ${escapeHtml(reason)}</li>`;
  });
  return `<p class="explain-line">Filtered out:</p><ul class="filtered">${rows.join("")}</ul>`;
}

function preemptionLines(p) {
  if (!p.node) return [`Preemption: none (${p.message || "no candidate"})`];
  const lines = [`Preemption: nominated to ${p.node}, evicting ${p.victims.join(", ")} (decided by: ${p.decidedBy || ""})`];
  for (const c of p.candidates || []) {
    lines.push(`  ${c.node === p.node ? "*" : " "} ${c.node}: victims ${c.victims.join(", ")}; PDB violations ${c.pdbViolations}, `
      + `highest priority ${c.highestPriority}, priority sum ${c.prioritySum}, ${c.victimCount} victim(s), earliest start ${c.earliestStartTime || "-"}`);
  }
  for (const r of p.rejected || []) lines.push(`    ${r.node}: not a candidate (${r.reasons.join(", ") || r.code})`);
  return lines;
}

// --- actions ------------------------------------------------------------------------------------
async function setCordon(node, unschedulable) {
  await api("PATCH", `/api/v1/nodes/${encodeURIComponent(node)}`, { spec: { unschedulable: unschedulable || null } }, "application/merge-patch+json");
  toast(`node/${node} ${unschedulable ? "cordoned" : "uncordoned"}`);
}

// As kubectl drain: cordon, then evict every pod on the node but DaemonSet pods and mirror pods
// (evictions honour PodDisruptionBudgets: a refused one is reported).
async function drain(node) {
  await setCordon(node, true);
  const pods = [...state.pods.values()].filter((p) => (p.spec || {}).nodeName === node && active(p)
    && !(p.metadata.ownerReferences || []).some((o) => o.kind === "DaemonSet")
    && !((p.metadata.annotations || {})["kubernetes.io/config.mirror"]));
  const refused = [];
  for (const pod of pods) {
    const { namespace, name } = pod.metadata;
    try {
      await api("POST", `/api/v1/namespaces/${encodeURIComponent(namespace)}/pods/${encodeURIComponent(name)}/eviction`,
        { apiVersion: "policy/v1", kind: "Eviction", metadata: { name, namespace } });
    } catch (e) {
      refused.push(`${namespace}/${name}: ${e.message}`);
    }
  }
  toast(refused.length ? `node/${node} drained except ${refused.join("; ")}` : `node/${node} drained (${pods.length} pod(s) evicted)`, refused.length > 0);
}

async function scale(k, replicas) {
  const { namespace, name } = splitKey(k);
  if (!Number.isInteger(replicas) || replicas < 0) throw new Error(`deployment ${k}: replicas must be a whole number of at least 0`);
  await api("PATCH", `/apis/apps/v1/namespaces/${encodeURIComponent(namespace)}/deployments/${encodeURIComponent(name)}/scale`,
    { spec: { replicas } }, "application/merge-patch+json");
  state.replicaDrafts.delete(k);
  toast(`deployment.apps/${name} scaled to ${replicas}`);
}

async function deletePod(k) {
  const { namespace, name } = splitKey(k);
  await api("DELETE", `/api/v1/namespaces/${encodeURIComponent(namespace)}/pods/${encodeURIComponent(name)}`);
  toast(`pod "${name}" deleted`);
}

const discovered = new Map();

function cached(path) {
  if (!discovered.has(path)) discovered.set(path, api("GET", path).catch((e) => { discovered.delete(path); throw e; }));
  return discovered.get(path);
}

// The resource (plural name, namespaced) of an apiVersion and kind, from the server's discovery
// (the served versions first, so that an unknown apiVersion is named without a failing request).
async function resourceFor(apiVersion, kind) {
  const core = !apiVersion.includes("/");
  const served = core ? (await cached("/api")).versions
    : (await cached("/apis")).groups.flatMap((g) => g.versions.map((v) => v.groupVersion));
  if (!served.includes(apiVersion)) throw new Error(`apiVersion "${apiVersion}" is not served`);
  const path = core ? `/api/${apiVersion}` : `/apis/${apiVersion}`;
  const found = (await cached(path)).resources.find((r) => r.kind === kind && !r.name.includes("/"));
  if (!found) throw new Error(`kind "${kind}" is not served in apiVersion "${apiVersion}"`);
  return { path, resource: found.name, namespaced: found.namespaced };
}

async function applyObject(obj, index) {
  const where = `document ${index + 1}`;
  if (!obj || typeof obj !== "object" || Array.isArray(obj)) throw new Error(`${where}: not an object`);
  if (!obj.apiVersion || !obj.kind) throw new Error(`${where}: apiVersion and kind are required`);
  const meta = obj.metadata || {};
  if (!meta.name) throw new Error(`${where} (${obj.kind}): metadata.name is required`);
  const { path, resource, namespaced } = await resourceFor(obj.apiVersion, obj.kind);
  const namespace = namespaced ? meta.namespace || "default" : null;
  const url = `${path}${namespace ? `/namespaces/${encodeURIComponent(namespace)}` : ""}/${resource}/${encodeURIComponent(meta.name)}`
    + `?fieldManager=${FIELD_MANAGER}&force=true`;
  await api("PATCH", url, obj, "application/apply-patch+yaml");
  return `${resource}/${meta.name} applied`;
}

async function applyText(text) {
  const out = $("apply-result");
  out.innerHTML = "";
  let docs;
  try {
    docs = jsyaml.loadAll(text).filter((d) => d !== null && d !== undefined);
  } catch (e) {
    out.innerHTML = `<li class="error">${escapeHtml(`invalid YAML: ${e.message}`)}</li>`;
    return;
  }
  const objects = docs.flatMap((d) => (d && typeof d.kind === "string" && d.kind.endsWith("List") && Array.isArray(d.items) ? d.items : [d]));
  if (!objects.length) { out.innerHTML = '<li class="error">nothing to apply</li>'; return; }
  for (const [index, obj] of objects.entries()) {
    try {
      out.insertAdjacentHTML("beforeend", `<li class="ok">${escapeHtml(await applyObject(obj, index))}</li>`);
    } catch (e) {
      out.insertAdjacentHTML("beforeend", `<li class="error">${escapeHtml(e.message)}</li>`);
    }
  }
}

// --- scenarios ----------------------------------------------------------------------------------
// A scenario runs on the server (POST /ui/api/scenarios): its steps go through the API with this
// page's token, so the cluster view follows them from the watches; the panel polls the run's status.
const SCENARIOS = "/ui/api/scenarios";
const RUN_POLL_MS = 500;
const TIMELINE_ROWS = 200;

async function startScenario() {
  $("scenario-error").textContent = "";
  const body = { scenario: $("scenario-text").value, speed: Number($("scenario-speed").value), name: state.scenarioName || "scenario" };
  try {
    showRun(await api("POST", SCENARIOS, body));
  } catch (e) {
    $("scenario-error").textContent = e.message;
  }
}

function showRun(run) {
  state.run = run;
  $("scenario-form").hidden = true;
  $("scenario-progress").hidden = false;
  renderRun(run);
  if (state.runTimer === null) state.runTimer = setTimeout(pollRun, RUN_POLL_MS);
}

// Poll while the run goes on, and while the panel is open (the timeline records the cluster's
// reaction for a while after the last step).
async function pollRun() {
  state.runTimer = null;
  if (!state.run) return;
  try {
    state.run = await api("GET", `${SCENARIOS}/${encodeURIComponent(state.run.id)}`);
    renderRun(state.run);
  } catch (e) {
    $("scenario-run-error").textContent = e.message;
    return;
  }
  if (state.run.state === "running" || !$("scenario-view").hidden) state.runTimer = setTimeout(pollRun, RUN_POLL_MS);
}

function happenedText(happened) {
  return Object.entries(happened).sort((a, b) => b[1] - a[1]).map(([event, n]) => `${event} ${n}`).join(", ");
}

function renderRun(run) {
  $("scenario-name").textContent = `${run.name} (run ${run.id}, by ${run.user})`;
  const badge = $("scenario-state");
  badge.textContent = run.state;
  badge.dataset.state = run.state;
  $("scenario-clock").textContent = `at ${run.now} of scenario time, ${run.speed}x`;
  $("scenario-next").disabled = !(run.state === "running" && run.waiting !== null);
  $("scenario-cancel").disabled = run.state !== "running";
  $("scenario-run-error").textContent = run.error || "";
  $("scenario-steps").innerHTML = run.steps.map((step) => `<li data-step="${step.index}" data-state="${escapeHtml(step.state)}">`
    + `<span class="step-state badge" data-state="${escapeHtml(step.state)}">${escapeHtml(step.state)}</span>`
    + `<strong>${escapeHtml(step.at)}</strong> ${escapeHtml(step.description)}`
    + (step.error ? `<div class="error step-error">${escapeHtml(step.error)}</div>` : "")
    + (Object.keys(step.happened).length ? `<div class="happened">${escapeHtml(happenedText(step.happened))}</div>` : "")
    + "</li>").join("");
  const rows = run.timeline.slice(-TIMELINE_ROWS).reverse();
  $("scenario-timeline").innerHTML = rows.map((e) => `<tr data-event="${escapeHtml(e.event)}"><td>${escapeHtml(e.at)}</td>`
    + `<td>${escapeHtml(e.event)}</td><td>${escapeHtml(e.object)}${e.node ? ` (${escapeHtml(e.node)})` : ""}</td>`
    + `<td>${escapeHtml(e.message || "")}</td></tr>`).join("") || '<tr><td class="empty">Nothing yet.</td></tr>';
}

function openScenarios() {
  $("pod-view").hidden = true;
  $("apply-view").hidden = true;
  $("scenario-view").hidden = false;
  if (state.run && state.runTimer === null) state.runTimer = setTimeout(pollRun, 0);
}

// A run already going (started from another tab, say) is shown; a server without scenario runs
// (`kubesched apiserver`) or a user not allowed to start them gets no button.
async function findRun() {
  try {
    const runs = (await api("GET", SCENARIOS)).items;
    const going = runs.find((r) => r.state === "running");
    if (going) { showRun(going); openScenarios(); }
  } catch (e) {
    if (e instanceof ApiError && (e.status === 403 || e.status === 404)) $("scenario-open").hidden = true;
    else throw e;
  }
}

async function run(action, fn) {
  try { await fn(); } catch (e) { toast(`${action}: ${e.message}`, true); }
}

function wire() {
  document.addEventListener("click", (event) => {
    const podEl = event.target.closest("[data-pod]");
    if (podEl && !event.target.closest(".panel")) { openPod(podEl.dataset.pod); return; }
    const button = event.target.closest("button[data-action]");
    if (!button) return;
    const target = button.dataset.target;
    const action = button.dataset.action;
    if (action === "cordon" || action === "uncordon") run(action, () => setCordon(target, action === "cordon"));
    else if (action === "drain") run(action, () => drain(target));
    else if (action === "scale") {
      const input = button.parentElement.querySelector("input");
      run(action, () => scale(target, Number(input.value)));
    }
  });
  for (const button of document.querySelectorAll(".tabs button")) button.addEventListener("click", () => showTab(button.dataset.tab));
  $("pod-close").addEventListener("click", () => { $("pod-view").hidden = true; state.selected = null; });
  $("pod-delete").addEventListener("click", () => run("delete", () => deletePod(state.selected)));
  $("apply-open").addEventListener("click", () => {
    $("pod-view").hidden = true;
    $("scenario-view").hidden = true;
    $("apply-view").hidden = false;
  });
  $("apply-close").addEventListener("click", () => { $("apply-view").hidden = true; });
  $("apply-submit").addEventListener("click", () => applyText($("apply-text").value));
  $("apply-file").addEventListener("change", async (event) => {
    const file = event.target.files[0];
    if (file) $("apply-text").value = await file.text();
  });
  $("scenario-open").addEventListener("click", openScenarios);
  $("scenario-close").addEventListener("click", () => { $("scenario-view").hidden = true; });
  $("scenario-start").addEventListener("click", startScenario);
  $("scenario-file").addEventListener("change", async (event) => {
    const file = event.target.files[0];
    if (file) { $("scenario-text").value = await file.text(); state.scenarioName = file.name; }
  });
  $("scenario-text").addEventListener("input", () => { state.scenarioName = null; });
  $("scenario-next").addEventListener("click", () => run("next step", async () => renderRun(
    state.run = await api("POST", `${SCENARIOS}/${encodeURIComponent(state.run.id)}/next`))));
  $("scenario-cancel").addEventListener("click", () => run("cancel", async () => renderRun(
    state.run = await api("DELETE", `${SCENARIOS}/${encodeURIComponent(state.run.id)}`))));
  $("scenario-new").addEventListener("click", () => {
    $("scenario-progress").hidden = true;
    $("scenario-form").hidden = false;
  });
  $("login-form").addEventListener("submit", (event) => {
    event.preventDefault();
    state.token = $("login-token").value.trim();
    start();
  });
}

// --- start --------------------------------------------------------------------------------------
function showLogin(message) {
  $("main").hidden = true;
  $("login").hidden = false;
  $("login-error").textContent = message || "";
  setConnection("error", "logged out");
}

async function redeemLoginCode() {
  const match = /(?:^#|&)login=([^&]+)/.exec(location.hash);
  if (!match) return;
  history.replaceState(null, "", location.pathname + location.search);
  const response = await fetch("login", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ code: match[1] }) });
  const body = await response.json();
  if (response.ok) state.token = body.token;
  else $("login-error").textContent = body.message;
}

async function start() {
  try {
    await api("GET", "/api/v1");
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) {
      sessionStorage.removeItem(TOKEN_KEY);
      showLogin(state.token ? "The token was refused." : $("login-error").textContent);
      return;
    }
    throw e;
  }
  if (state.token) sessionStorage.setItem(TOKEN_KEY, state.token);
  $("login").hidden = true;
  keepSynced("nodes", "/api/v1/nodes", state.nodes);
  keepSynced("pods", "/api/v1/pods", state.pods, "/ui/api/pods");
  keepSynced("deployments", "/apis/apps/v1/deployments", state.deployments);
  findRun().catch((e) => toast(`scenario runs: ${e.message}`, true));
}

wire();
redeemLoginCode().then(start).catch((e) => setConnection("error", String(e.message || e)));
