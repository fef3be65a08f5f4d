"use strict";
// The dashboard of /gateway/: one snapshot from dashboard.json, then one a second over
// server-sent events (events). Everything from the gateway is set as text, never as HTML.

const SVG = "http://www.w3.org/2000/svg";
const BIN_S = 30;
const SPAN_S = 15 * 60;
const PHASE_COLOURS = ["#6e7681", "#a371f7", "#58a6ff", "#3fb950", "#d29922", "#f778ba", "#79c0ff", "#8b949e"];

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (key === "style") node.style.cssText = value;
    else node.setAttribute(key, value);
  }
  for (const child of children) {
    if (child !== null && child !== undefined) node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

function bar(kind, parts) {
  return el("div", { class: `bar ${kind}` }, ...parts.map(([share, cls, colour, title]) =>
    el("span", { class: cls || "", title: title || "",
      style: `width:${(100 * Math.max(0, Math.min(share, 1))).toFixed(1)}%` + (colour ? `;background:${colour}` : "") })));
}

function short(id) { return id ? String(id).slice(0, 8) : "—"; }
function seconds(value) { return value === null || value === undefined ? "—" : Number(value).toFixed(value < 10 ? 2 : 1); }

function gpuLines(telemetry) {
  if (!telemetry || !telemetry.available) return [];
  return (telemetry.gpus || []).map((gpu) => {
    const used = gpu.memory_used_mib / Math.max(gpu.memory_total_mib, 1);
    const util = gpu.utilization_pct === null ? "" : ` · ${gpu.utilization_pct} % busy`;
    return [`GPU ${gpu.index}`, el("div", {},
      `${(gpu.memory_used_mib / 1024).toFixed(1)} / ${(gpu.memory_total_mib / 1024).toFixed(1)} GiB${util}`,
      bar("meter", [[used]]))];
  });
}

function card(worker) {
  const rows = [
    ["group", worker.group],
    ["card", (worker.learned && worker.learned.card) || (worker.emulated ? "emulated" : worker.gpu || "—")],
    ["models", (worker.resident || []).join(", ") || "none loaded"],
    ...gpuLines(worker.telemetry),
    ["jobs", `${(worker.held || []).length} held` + (worker.restarts ? ` · ${worker.restarts} restarts` : "")],
  ];
  if (worker.warming) rows.push(["warming up", worker.warming]);
  else if (worker.cold) rows.push(["cold", "has run nothing: warms up once idle after a job"]);
  if (worker.running) {
    const [value, most] = worker.progress || [0, 0];
    rows.push(["running", el("div", {}, short(worker.running) + (most ? ` · step ${value}/${most}` : ""),
      bar("progress", [[most ? value / most : 0]]))]);
  }
  const list = el("dl", {});
  for (const [term, detail] of rows) list.append(el("dt", {}, term), el("dd", {}, detail));
  return el("div", { class: "card", "data-worker": worker.name },
    el("div", { class: "title" }, el("span", { class: "name" }, worker.name),
      el("span", { class: `state ${worker.state}` }, worker.state)),
    list);
}

function renderCards(workers) {
  document.getElementById("cards").replaceChildren(...workers.map(card));
}

function renderQueue(queue) {
  const body = document.querySelector("#queue tbody");
  body.replaceChildren(...queue.map((row) => el("tr", {}, el("td", {}, row.model), el("td", { class: "num" }, row.jobs))));
  document.getElementById("queue-empty").hidden = queue.length > 0;
}

function ledgerPhases(job) {
  // The phase ledger of the history entry's gateway block (queue, dispatch, then execution by
  // node class), when the job has one.
  const ledger = job.ledger;
  if (!ledger || typeof ledger.phases !== "object" || !ledger.phases) return null;
  const phases = [["queue", ledger.queue_s], ["dispatch", ledger.dispatch_s], ...Object.entries(ledger.phases)];
  return phases.filter(([, s]) => typeof s === "number" && s > 0);
}

function timeBars(job) {
  const phases = ledgerPhases(job);
  if (phases && phases.length) {
    return phases.map(([phase, s], i) => [s, "", PHASE_COLOURS[i % PHASE_COLOURS.length], `${phase} ${seconds(s)} s`]);
  }
  const { enqueued_at_ms: queued, started_at_ms: started, finished_at_ms: finished } = job;
  if (!queued || !finished) return [];
  const queue = ((started || finished) - queued) / 1000;
  const execution = started ? (finished - started) / 1000 : 0;
  return [[queue, "phase-queue", "", `queue ${seconds(queue)} s`], [execution, "phase-execution", "", `execution ${seconds(execution)} s`]];
}

function total(job) {
  return job.enqueued_at_ms && job.finished_at_ms ? (job.finished_at_ms - job.enqueued_at_ms) / 1000 : null;
}

function renderRecent(recent) {
  const longest = Math.max(0.001, ...recent.map((job) => total(job) || 0));
  const body = document.querySelector("#recent tbody");
  body.replaceChildren(...recent.map((job) => {
    const parts = timeBars(job).map(([s, cls, colour, title]) => [s / longest, cls, colour, title]);
    return el("tr", { "data-prompt": job.prompt_id },
      el("td", { title: job.prompt_id }, short(job.prompt_id)),
      el("td", { class: job.state }, job.state),
      el("td", {}, job.worker || "—"), el("td", {}, job.group || "—"),
      el("td", {}, job.checkpoint || "—"),
      el("td", { class: "num" }, seconds(total(job))),
      el("td", {}, bar("time", parts)));
  }));
  const phased = recent.map(ledgerPhases).find((phases) => phases && phases.length);
  const legend = phased
    ? phased.map(([phase], i) => [phase, `background:${PHASE_COLOURS[i % PHASE_COLOURS.length]}`])
    : [["queue", "background:#6e7681"], ["execution", "background:#58a6ff"]];
  document.getElementById("legend").replaceChildren(...legend.map(([name, style]) =>
    el("span", {}, el("span", { class: "swatch", style }), name)));
}

function bins(finishes, nowMs) {
  const count = SPAN_S / BIN_S;
  const out = Array.from({ length: count }, () => []);
  for (const [atMs, , totalS] of finishes) {
    const back = Math.floor((nowMs - atMs) / 1000 / BIN_S);
    if (back >= 0 && back < count) out[count - 1 - back].push(totalS === null ? 0 : totalS);
  }
  return out;
}

function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted.length ? sorted[Math.floor((sorted.length - 1) / 2)] : null;
}

function svg(tag, attrs) {
  const node = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, value);
  return node;
}

function axis(chart, top) {
  const label = svg("text", { x: 2, y: 10 });
  label.textContent = top.toFixed(top < 10 ? 1 : 0);
  const left = svg("text", { x: 2, y: 118 });
  left.textContent = "−15 min";
  chart.append(label, left);
}

function renderThroughput(binned) {
  const chart = document.getElementById("throughput");
  const perMinute = binned.map((jobs) => jobs.length * 60 / BIN_S);
  const top = Math.max(1, ...perMinute);
  const width = 360 / binned.length;
  chart.replaceChildren(...perMinute.map((rate, i) => svg("rect", {
    x: i * width + 1, width: width - 2, y: 120 - 110 * rate / top, height: 110 * rate / top, fill: "#58a6ff",
  })));
  axis(chart, top);
}

function line(values, top, colour) {
  const width = 360 / values.length;
  const points = values.map((v, i) => (v === null ? null : [(i + 0.5) * width, 120 - 110 * v / top])).filter(Boolean);
  const group = svg("g", {});
  group.append(svg("polyline", { points: points.map((p) => p.join(",")).join(" "), fill: "none", stroke: colour, "stroke-width": 2 }));
  for (const [x, y] of points) group.append(svg("circle", { cx: x, cy: y, r: 2.5, fill: colour }));
  return group;
}

function renderLatency(binned) {
  const chart = document.getElementById("latency");
  const medians = binned.map(median);
  const slowest = binned.map((jobs) => (jobs.length ? Math.max(...jobs) : null));
  const top = Math.max(0.1, ...slowest.filter((v) => v !== null));
  chart.replaceChildren(line(slowest, top, "#d29922"), line(medians, top, "#3fb950"));
  axis(chart, top);
}

function renderExperiments(experiments) {
  const section = document.getElementById("experiments");
  section.hidden = !(experiments && experiments.length);
  if (section.hidden) return;
  document.getElementById("verdicts").replaceChildren(...experiments.map((e) =>
    el("li", {}, el("strong", {}, e.name || "experiment"), " — ", e.verdict || "")));
}

function render(snapshot) {
  renderCards(snapshot.workers);
  renderQueue(snapshot.queue);
  renderRecent(snapshot.recent);
  const binned = bins(snapshot.finishes, snapshot.now_ms);
  renderThroughput(binned);
  renderLatency(binned);
  renderExperiments(snapshot.experiments);
  const ready = snapshot.workers.filter((w) => w.state === "ready").length;
  const waiting = snapshot.queue.reduce((sum, row) => sum + row.jobs, 0);
  document.getElementById("summary").textContent =
    `${ready}/${snapshot.workers.length} cards ready · ${waiting} waiting · node ${snapshot.node}`;
  document.body.dataset.updated = String(snapshot.now_ms);
}

function live() {
  const source = new EventSource("events");
  const status = document.getElementById("live");
  source.onmessage = (event) => {
    render(JSON.parse(event.data));
    status.textContent = "live";
    status.classList.remove("off");
  };
  source.onerror = () => {
    status.textContent = "reconnecting";
    status.classList.add("off");
  };
}

fetch("dashboard.json", { credentials: "same-origin" })
  .then((answer) => (answer.ok ? answer.json() : Promise.reject(new Error(`dashboard.json: ${answer.status}`))))
  .then(render)
  .catch((error) => { document.getElementById("summary").textContent = String(error); })
  .finally(live);
