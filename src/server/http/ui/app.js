// rtsd's web UI: build an OpenTSDB query (metrics, tags, aggregator, downsample, rate, time range), graph
// /api/query's answer on a canvas, keep the whole query in the URL (#start=...&m=..., the query string /q takes,
// so /q links without an output flag open here), and show the daemon's status. Plain JavaScript, no build step,
// no third-party code: the daemon embeds this file as it is.
"use strict";

// Gnuplot's default line colours, as /q?png draws them.
const PALETTE = ["#9400d3", "#009e73", "#56b4e9", "#e69f00", "#f0e442", "#0072b2", "#e51e10", "#000000"];

const $ = (sel, root = document) => root.querySelector(sel);
const $$ = (sel, root = document) => Array.from(root.querySelectorAll(sel));

/** An error answer of the HTTP API, with OpenTSDB's message and details. */
class ApiError extends Error {
  constructor(status, message, details) {
    super(message);
    this.status = status;
    this.details = details;
  }
}

/** GETs a path of the API and returns its JSON, or throws an ApiError with OpenTSDB's error envelope. */
async function api(path) {
  let response;
  try {
    response = await fetch(path, { headers: { Accept: "application/json" } });
  } catch (e) {
    throw new ApiError(0, "rtsd did not answer: " + e.message, "");
  }
  const text = await response.text();
  let body = null;
  try {
    body = text ? JSON.parse(text) : null;
  } catch (e) {
    if (!response.ok) throw new ApiError(response.status, text.slice(0, 500), "");
    throw new ApiError(response.status, "The answer was not JSON: " + e.message, text.slice(0, 500));
  }
  if (!response.ok) {
    const err = (body && body.error) || {};
    const details = err.details && err.details !== err.message ? err.details : "";
    throw new ApiError(response.status, err.message || `HTTP ${response.status}`, details);
  }
  return body;
}

// ---------------------------------------------------------------------------------------------------------------
// m= expressions: agg[:rate[{counter[,max[,reset]]}]][:interval-function[-fill]]:metric[{group-by}][{filters}]

/** Splits at `sep` outside braces and parentheses. */
function splitTop(s, sep) {
  const out = [];
  let depth = 0, from = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s[i];
    if (c === "{" || c === "(") depth++;
    else if (c === "}" || c === ")") depth--;
    else if (c === sep && depth === 0) {
      out.push(s.slice(from, i));
      from = i + 1;
    }
  }
  out.push(s.slice(from));
  return out;
}

/** The `k=v` pairs of one `{...}` group. */
function parseTagGroup(body, groupBy) {
  if (!body.trim()) return [];
  return splitTop(body, ",").map((pair) => {
    const eq = pair.indexOf("=");
    return { k: pair.slice(0, eq).trim(), v: pair.slice(eq + 1).trim(), groupBy };
  });
}

/** Reads an m= expression into the form's model; unknown shapes keep what can be read. */
function parseM(m) {
  const q = newMetric();
  const parts = splitTop(m, ":");
  const last = parts.pop();
  q.aggregator = parts.shift() || "sum";
  for (const p of parts) {
    if (p.startsWith("rate")) {
      q.rate = true;
      const inner = /\{(.*)\}/.exec(p);
      if (inner) {
        const opts = inner[1].split(",");
        q.counter = opts[0] === "counter";
        q.counterMax = opts[1] || "";
        q.resetValue = opts[2] || "";
      }
    } else if (p === "explicit_tags" || p.startsWith("rollup") || p.startsWith("pre-agg")) {
      q.extra.push(p);
    } else if (p.includes("-")) {
      const [interval, fn, fill] = p.split("-");
      Object.assign(q, { downsample: true, dsInterval: interval, dsFunction: fn, dsFill: fill || "" });
    }
  }
  const brace = last.indexOf("{");
  q.metric = brace < 0 ? last : last.slice(0, brace);
  if (brace >= 0) {
    const groups = [];
    let depth = 0, from = -1;
    for (let i = brace; i < last.length; i++) {
      if (last[i] === "{") {
        if (depth++ === 0) from = i + 1;
      } else if (last[i] === "}" && --depth === 0) {
        groups.push(last.slice(from, i));
      }
    }
    q.tags = parseTagGroup(groups[0] || "", true).concat(parseTagGroup(groups[1] || "", false));
  }
  return q;
}

/** Writes the form's model of one metric as an m= expression. */
function buildM(q) {
  let m = q.aggregator || "sum";
  if (q.rate) {
    m += ":rate";
    if (q.counter) {
      const opts = ["counter"];
      if (q.counterMax || q.resetValue) opts.push(q.counterMax);
      if (q.resetValue) opts.push(q.resetValue);
      m += "{" + opts.join(",") + "}";
    }
  }
  if (q.downsample && q.dsInterval) {
    m += ":" + q.dsInterval + "-" + (q.dsFunction || "avg") + (q.dsFill ? "-" + q.dsFill : "");
  }
  for (const e of q.extra) m += ":" + e;
  m += ":" + q.metric.trim();
  const tags = q.tags.filter((t) => t.k && t.v);
  const group = tags.filter((t) => t.groupBy).map((t) => `${t.k}=${t.v}`);
  const filters = tags.filter((t) => !t.groupBy).map((t) => `${t.k}=${t.v}`);
  if (group.length || filters.length) m += "{" + group.join(",") + "}";
  if (filters.length) m += "{" + filters.join(",") + "}";
  return m;
}

function newMetric() {
  return {
    metric: "", aggregator: "sum", rate: false, counter: false, counterMax: "", resetValue: "",
    downsample: false, dsInterval: "1m", dsFunction: "avg", dsFill: "", tags: [], extra: [], right: false,
  };
}

// ---------------------------------------------------------------------------------------------------------------
// The form

let aggregators = ["sum", "avg", "min", "max", "count", "zimsum", "mimmin", "mimmax", "dev", "none"];
let tagRowSeq = 0;

function fillSelect(select, values, selected) {
  select.textContent = "";
  for (const v of values) {
    const o = document.createElement("option");
    o.value = o.textContent = v;
    select.appendChild(o);
  }
  if (selected !== undefined) select.value = selected;
}

/** Adds a metric panel filled from `q`. */
function addMetricPanel(q = newMetric()) {
  const panel = $("#metric-template").content.firstElementChild.cloneNode(true);
  panel.tagIndex = new Map();
  $(".metric-name", panel).value = q.metric;
  fillSelect($(".aggregator", panel), aggregators, q.aggregator);
  fillSelect($(".ds-function", panel), aggregators.filter((a) => a !== "none"), q.dsFunction);
  $(".rate", panel).checked = q.rate;
  $(".counter", panel).checked = q.counter;
  $(".counter-max", panel).value = q.counterMax;
  $(".reset-value", panel).value = q.resetValue;
  $(".downsample", panel).checked = q.downsample;
  $(".ds-interval", panel).value = q.dsInterval;
  $(".ds-fill", panel).value = q.dsFill;
  $(".right-axis", panel).checked = q.right;
  panel.extra = q.extra;
  const sync = () => {
    $(".rate-options", panel).hidden = !$(".rate", panel).checked;
    $(".downsample-options", panel).hidden = !$(".downsample", panel).checked;
  };
  $(".rate", panel).addEventListener("change", sync);
  $(".downsample", panel).addEventListener("change", sync);
  sync();
  const name = $(".metric-name", panel);
  name.addEventListener("input", debounce(() => suggestMetrics(name.value), 150));
  name.addEventListener("change", () => loadTags(panel));
  $(".add-tag", panel).addEventListener("click", () => addTagRow(panel, { k: "", v: "", groupBy: true }));
  $(".remove-metric", panel).addEventListener("click", () => {
    panel.remove();
    if (!$$("#metrics fieldset").length) addMetricPanel();
  });
  for (const t of q.tags) addTagRow(panel, t);
  $("#metrics").appendChild(panel);
  if (q.metric) loadTags(panel);
  return panel;
}

function addTagRow(panel, t) {
  const row = $("#tag-template").content.firstElementChild.cloneNode(true);
  const list = document.createElement("datalist");
  list.id = "tagv-list-" + ++tagRowSeq;
  row.appendChild(list);
  const value = $(".tagv", row);
  value.setAttribute("list", list.id);
  value.value = t.v;
  $(".group-by", row).checked = t.groupBy;
  const key = $(".tagk", row);
  key.dataset.wanted = t.k;
  key.addEventListener("change", () => fillTagValues(panel, row));
  $(".remove-tag", row).addEventListener("click", () => row.remove());
  $(".tags", panel).appendChild(row);
  fillTagKeys(panel, row);
  return row;
}

/** The keys a tag row offers: those of the metric's series, plus whatever the row already names. */
function fillTagKeys(panel, row) {
  const key = $(".tagk", row);
  const wanted = key.value || key.dataset.wanted || "";
  const keys = Array.from(panel.tagIndex.keys()).sort();
  if (wanted && !keys.includes(wanted)) keys.push(wanted);
  fillSelect(key, [""].concat(keys), wanted);
  fillTagValues(panel, row);
}

function fillTagValues(panel, row) {
  const values = Array.from(panel.tagIndex.get($(".tagk", row).value) || []).sort();
  const list = $("datalist", row);
  list.textContent = "";
  for (const v of ["*"].concat(values)) {
    const o = document.createElement("option");
    o.value = v;
    list.appendChild(o);
  }
}

/** Loads the tag keys and values of a metric's series (/api/search/lookup) into its panel's pickers. */
async function loadTags(panel) {
  const metric = $(".metric-name", panel).value.trim();
  panel.tagIndex = new Map();
  if (metric) {
    try {
      const answer = await api("api/search/lookup?m=" + encodeURIComponent(metric) + "&limit=100000");
      for (const r of answer.results || []) {
        for (const [k, v] of Object.entries(r.tags || {})) {
          if (!panel.tagIndex.has(k)) panel.tagIndex.set(k, new Set());
          panel.tagIndex.get(k).add(v);
        }
      }
    } catch (e) {
      // An unknown metric has no tags to offer; running the query explains why.
    }
  }
  panel.dataset.tagsLoaded = metric;
  for (const row of $$(".tag", panel)) fillTagKeys(panel, row);
}

async function suggestMetrics(prefix) {
  try {
    const names = await api("api/suggest?type=metrics&max=50&q=" + encodeURIComponent(prefix));
    const list = $("#metric-names");
    list.textContent = "";
    for (const n of names) {
      const o = document.createElement("option");
      o.value = n;
      list.appendChild(o);
    }
  } catch (e) {
    // Suggestions are a convenience: say nothing.
  }
}

/** The model of every metric panel. */
function readForm() {
  return $$("#metrics fieldset").map((panel) => ({
    metric: $(".metric-name", panel).value,
    aggregator: $(".aggregator", panel).value,
    rate: $(".rate", panel).checked,
    counter: $(".counter", panel).checked,
    counterMax: $(".counter-max", panel).value.trim(),
    resetValue: $(".reset-value", panel).value.trim(),
    downsample: $(".downsample", panel).checked,
    dsInterval: $(".ds-interval", panel).value.trim(),
    dsFunction: $(".ds-function", panel).value,
    dsFill: $(".ds-fill", panel).value,
    right: $(".right-axis", panel).checked,
    extra: panel.extra || [],
    tags: $$(".tag", panel).map((row) => ({
      k: $(".tagk", row).value,
      v: $(".tagv", row).value.trim(),
      groupBy: $(".group-by", row).checked,
    })),
  })).filter((q) => q.metric.trim());
}

/** The query string of the current form: `start`, `end`, one `m` per metric (what /api/query and /q take);
 *  with `withAxes`, also one `o` per `m` when a metric is on the right axis (as /q reads them). */
function queryString(withAxes) {
  const p = new URLSearchParams();
  p.set("start", $("#start").value.trim() || "1h-ago");
  if ($("#end").value.trim()) p.set("end", $("#end").value.trim());
  const metrics = readForm();
  for (const q of metrics) p.append("m", buildM(q));
  if (withAxes && metrics.some((q) => q.right)) {
    for (const q of metrics) p.append("o", q.right ? "axis x1y2" : "");
  }
  return p;
}

/** The URL fragment: the query plus the refresh period. */
function writeHash(push) {
  const p = queryString(true);
  const every = $("#autoreload").value;
  if (every !== "0") p.set("autoreload", every);
  const hash = "#" + p.toString();
  if (location.hash !== hash) {
    if (push) history.pushState(null, "", hash);
    else history.replaceState(null, "", hash);
  }
}

/** Fills the form from the URL fragment (also what /q's redirect sends). Returns whether it named metrics. */
function readHash() {
  const p = new URLSearchParams(location.hash.replace(/^#/, ""));
  $("#start").value = p.get("start") || "1h-ago";
  $("#end").value = p.get("end") || "";
  const every = p.get("autoreload") || "0";
  $("#autoreload").value = $$("#autoreload option").some((o) => o.value === every) ? every : "0";
  $("#metrics").textContent = "";
  const ms = p.getAll("m");
  const os = p.getAll("o");
  ms.forEach((m, i) => addMetricPanel(Object.assign(parseM(m), { right: (os[i] || "").includes("x1y2") })));
  if (!ms.length) addMetricPanel();
  return ms.length > 0;
}

// ---------------------------------------------------------------------------------------------------------------
// Running the query

let series = [];
let refreshTimer = null;
let running = 0;

function showError(e) {
  const box = $("#error");
  if (!e) {
    box.hidden = true;
    return;
  }
  box.hidden = false;
  box.textContent = "";
  const head = document.createElement("div");
  head.textContent = (e.status ? `Error ${e.status}: ` : "") + e.message;
  box.appendChild(head);
  if (e.details) {
    const d = document.createElement("div");
    d.className = "details";
    d.textContent = e.details;
    box.appendChild(d);
  }
}

/** A result's name: `metric{tag=value,...}`, plus the tags it aggregates over. */
function seriesLabel(r) {
  const tags = Object.entries(r.tags || {}).map(([k, v]) => `${k}=${v}`).join(", ");
  const agg = (r.aggregateTags || []).length ? ` (over ${r.aggregateTags.join(", ")})` : "";
  return `${r.metric}{${tags}}${agg}`;
}

async function runQuery(push) {
  const metrics = readForm();
  if (!metrics.length) {
    showError({ message: "Name a metric to graph." });
    return;
  }
  writeHash(push);
  const qs = queryString();
  const id = ++running;
  $("#run").disabled = true;
  try {
    const started = performance.now();
    const answer = await api("api/query?" + qs.toString() + "&arrays&ms&show_query");
    if (id !== running) return;
    showError(null);
    series = answer.map((r, i) => ({
      label: seriesLabel(r),
      color: PALETTE[i % PALETTE.length],
      visible: true,
      right: !!(metrics[(r.query || {}).index] || {}).right,
      points: (r.dps || []).filter((p) => typeof p[1] === "number").map((p) => [p[0], p[1]]),
    }));
    const points = series.reduce((n, s) => n + s.points.length, 0);
    $("#summary").textContent = `${series.length} series, ${points} points in ${Math.round(performance.now() - started)} ms.`;
    $("#png-link").href = "q?" + queryString(true).toString() + "&wxh=1024x600&png";
    $("#ascii-link").href = "q?" + qs.toString() + "&ascii";
    $("#api-link").href = "api/query?" + qs.toString();
    $("#links").hidden = false;
  } catch (e) {
    if (id !== running) return;
    series = [];
    showError(e);
    $("#links").hidden = true;
  } finally {
    if (id === running) $("#run").disabled = false;
  }
  renderLegend();
  draw();
}

function scheduleRefresh() {
  clearInterval(refreshTimer);
  const every = Number($("#autoreload").value);
  if (every > 0) refreshTimer = setInterval(() => runQuery(false), every * 1000);
}

// ---------------------------------------------------------------------------------------------------------------
// The chart: a canvas with time and value axes, one line per series, a legend, and hover values.

const MARGIN = { left: 70, right: 20, top: 14, bottom: 34 };
let view = null; // the scales of the last drawing

function niceStep(range, count) {
  const raw = range / Math.max(count, 1);
  const mag = Math.pow(10, Math.floor(Math.log10(raw)));
  for (const m of [1, 2, 2.5, 5, 10]) if (raw <= m * mag) return m * mag;
  return 10 * mag;
}

const TIME_STEPS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400,
  172800, 604800, 2592000, 31536000].map((s) => s * 1000);

function pad(n) {
  return String(n).padStart(2, "0");
}

function formatTime(ms, spanMs) {
  const d = new Date(ms);
  const hm = `${pad(d.getHours())}:${pad(d.getMinutes())}`;
  if (spanMs <= 600000) return `${hm}:${pad(d.getSeconds())}`;
  if (spanMs <= 86400000 * 2) return hm;
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}` + (spanMs <= 86400000 * 14 ? " " + hm : "");
}

function fullTime(ms) {
  const d = new Date(ms);
  return `${d.getFullYear()}/${pad(d.getMonth() + 1)}/${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}` +
    (ms % 1000 ? "." + String(ms % 1000).padStart(3, "0") : "");
}

function formatValue(v) {
  if (v === 0) return "0";
  const a = Math.abs(v);
  if (a >= 1e6 || a < 1e-3) return v.toExponential(2);
  return String(Number(v.toPrecision(6)));
}

function draw(hover) {
  const canvas = $("#chart");
  const ratio = window.devicePixelRatio || 1;
  const width = canvas.clientWidth, height = canvas.clientHeight;
  if (canvas.width !== Math.round(width * ratio) || canvas.height !== Math.round(height * ratio)) {
    canvas.width = Math.round(width * ratio);
    canvas.height = Math.round(height * ratio);
  }
  const ctx = canvas.getContext("2d");
  ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
  ctx.clearRect(0, 0, width, height);
  const shown = series.filter((s) => s.visible && s.points.length);
  $("#empty").hidden = !!shown.length || !series.length;
  view = null;
  if (!shown.length) return;

  let x0 = Infinity, x1 = -Infinity;
  for (const s of shown) {
    x0 = Math.min(x0, s.points[0][0]);
    x1 = Math.max(x1, s.points[s.points.length - 1][0]);
  }
  if (x0 === x1) { x0 -= 60000; x1 += 60000; }
  // A second value scale on the right for the metrics that ask for it (when others use the left one).
  const dual = shown.some((s) => s.right) && shown.some((s) => !s.right);
  const marginRight = dual ? 70 : MARGIN.right;
  const plotW = width - MARGIN.left - marginRight, plotH = height - MARGIN.top - MARGIN.bottom;
  const sx = (t) => MARGIN.left + ((t - x0) / (x1 - x0)) * plotW;
  const scale = (list) => {
    let y0 = Infinity, y1 = -Infinity;
    for (const s of list) for (const p of s.points) { y0 = Math.min(y0, p[1]); y1 = Math.max(y1, p[1]); }
    if (y0 === y1) { y0 -= Math.abs(y0) * 0.1 || 1; y1 += Math.abs(y1) * 0.1 || 1; }
    const step = niceStep(y1 - y0, Math.max(2, Math.floor(height / 60)));
    y0 = Math.floor(y0 / step) * step;
    y1 = Math.ceil(y1 / step) * step;
    return { y0, y1, step, sy: (v) => MARGIN.top + (1 - (v - y0) / (y1 - y0)) * plotH };
  };
  const left = scale(dual ? shown.filter((s) => !s.right) : shown);
  const right = dual ? scale(shown.filter((s) => s.right)) : null;
  for (const s of shown) s.sy = dual && s.right ? right.sy : left.sy;
  view = { x0, x1, sx, plotW, plotH, left, right };

  // Grid and labels.
  ctx.font = "12px system-ui, sans-serif";
  ctx.strokeStyle = "#e2e8f0";
  ctx.fillStyle = "#475569";
  ctx.lineWidth = 1;
  ctx.textBaseline = "middle";
  for (let v = left.y0; v <= left.y1 + left.step / 2; v += left.step) {
    const y = Math.round(left.sy(v)) + 0.5;
    ctx.beginPath(); ctx.moveTo(MARGIN.left, y); ctx.lineTo(MARGIN.left + plotW, y); ctx.stroke();
    ctx.textAlign = "right";
    ctx.fillText(formatValue(Number(v.toPrecision(12))), MARGIN.left - 6, y);
  }
  if (right) {
    ctx.textAlign = "left";
    for (let v = right.y0; v <= right.y1 + right.step / 2; v += right.step) {
      ctx.fillText(formatValue(Number(v.toPrecision(12))), MARGIN.left + plotW + 6, Math.round(right.sy(v)) + 0.5);
    }
  }
  const span = x1 - x0;
  const tstep = TIME_STEPS.find((s) => span / s <= Math.max(2, Math.floor(plotW / 110))) || TIME_STEPS[TIME_STEPS.length - 1];
  const offset = new Date(x0).getTimezoneOffset() * 60000;
  ctx.textAlign = "center";
  ctx.textBaseline = "top";
  for (let t = Math.ceil((x0 - offset) / tstep) * tstep + offset; t <= x1; t += tstep) {
    const x = Math.round(sx(t)) + 0.5;
    ctx.beginPath(); ctx.moveTo(x, MARGIN.top); ctx.lineTo(x, MARGIN.top + plotH); ctx.stroke();
    ctx.fillText(formatTime(t, span), x, MARGIN.top + plotH + 6);
  }
  ctx.strokeStyle = "#94a3b8";
  ctx.strokeRect(MARGIN.left + 0.5, MARGIN.top + 0.5, plotW, plotH);

  // Lines (with dots when there are few points).
  ctx.save();
  ctx.beginPath();
  ctx.rect(MARGIN.left, MARGIN.top, plotW + 1, plotH + 1);
  ctx.clip();
  for (const s of shown) {
    ctx.strokeStyle = ctx.fillStyle = s.color;
    ctx.lineWidth = 1.5;
    ctx.beginPath();
    s.points.forEach((p, i) => (i ? ctx.lineTo(sx(p[0]), s.sy(p[1])) : ctx.moveTo(sx(p[0]), s.sy(p[1]))));
    ctx.stroke();
    if (s.points.length <= plotW / 6) {
      for (const p of s.points) {
        ctx.beginPath(); ctx.arc(sx(p[0]), s.sy(p[1]), 2, 0, 2 * Math.PI); ctx.fill();
      }
    }
  }
  ctx.restore();

  if (hover) {
    ctx.strokeStyle = "#64748b";
    ctx.beginPath(); ctx.moveTo(hover.x + 0.5, MARGIN.top); ctx.lineTo(hover.x + 0.5, MARGIN.top + plotH); ctx.stroke();
    for (const h of hover.rows) {
      ctx.fillStyle = h.series.color;
      ctx.beginPath(); ctx.arc(sx(h.point[0]), h.series.sy(h.point[1]), 4, 0, 2 * Math.PI); ctx.fill();
    }
  }
}

/** The point of `s` nearest to time `t` (points are in time order). */
function nearest(s, t) {
  const pts = s.points;
  let lo = 0, hi = pts.length - 1;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (pts[mid][0] < t) lo = mid + 1; else hi = mid;
  }
  if (lo > 0 && t - pts[lo - 1][0] <= pts[lo][0] - t) lo--;
  return pts[lo];
}

function onHover(event) {
  const tip = $("#tooltip");
  if (!view) return;
  const rect = $("#chart").getBoundingClientRect();
  const x = event.clientX - rect.left;
  if (x < MARGIN.left || x > MARGIN.left + view.plotW) {
    tip.hidden = true;
    draw();
    return;
  }
  const t = view.x0 + ((x - MARGIN.left) / view.plotW) * (view.x1 - view.x0);
  const rows = series.filter((s) => s.visible && s.points.length).map((s) => ({ series: s, point: nearest(s, t) }));
  tip.textContent = "";
  const closest = rows.reduce((a, b) => (Math.abs(b.point[0] - t) < Math.abs(a.point[0] - t) ? b : a));
  const head = document.createElement("div");
  head.className = "time";
  head.textContent = fullTime(closest.point[0]);
  tip.appendChild(head);
  for (const r of rows) {
    const row = document.createElement("div");
    row.className = "tip-row";
    row.dataset.series = r.series.label;
    row.dataset.ts = r.point[0];
    row.dataset.value = r.point[1];
    const sw = document.createElement("span");
    sw.className = "swatch";
    sw.style.background = r.series.color;
    row.appendChild(sw);
    row.appendChild(document.createTextNode(`${r.series.label}: ${r.point[1]}` +
      (r.point[0] !== closest.point[0] ? ` (at ${fullTime(r.point[0])})` : "")));
    tip.appendChild(row);
  }
  tip.hidden = false;
  const left = x + 16 + tip.offsetWidth > rect.width ? x - 16 - tip.offsetWidth : x + 16;
  tip.style.left = Math.max(0, left) + "px";
  tip.style.top = Math.max(0, event.clientY - rect.top - tip.offsetHeight / 2) + "px";
  draw({ x, rows });
}

function renderLegend() {
  const legend = $("#legend");
  legend.textContent = "";
  for (const s of series) {
    const li = document.createElement("li");
    li.className = s.visible ? "" : "off";
    li.title = "Click to hide or show";
    const sw = document.createElement("span");
    sw.className = "swatch";
    sw.style.background = s.color;
    li.appendChild(sw);
    li.appendChild(document.createTextNode(s.label + (s.right ? " (right axis)" : "") + (s.points.length ? "" : " (no points)")));
    li.addEventListener("click", () => {
      s.visible = !s.visible;
      renderLegend();
      draw();
    });
    legend.appendChild(li);
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Status: rtsd's own counters

let statusTimer = null;
let lastAdded = null;

function humanBytes(n) {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(1) : String(n)) + " " + units[i];
}

/** Prometheus text: the sum of a metric's samples. */
function promValue(text, name) {
  let sum = null;
  for (const line of text.split("\n")) {
    if (line.startsWith(name + " ") || line.startsWith(name + "{")) {
      const v = Number(line.slice(line.lastIndexOf(" ") + 1));
      if (!Number.isNaN(v)) sum = (sum || 0) + v;
    }
  }
  return sum;
}

async function refreshStatus() {
  const rows = [];
  try {
    const [stats, metrics] = await Promise.all([
      api("api/stats"),
      fetch("metrics").then((r) => (r.ok ? r.text() : Promise.reject(new Error("HTTP " + r.status)))),
    ]);
    const stat = (metric, tag) => {
      const e = stats.find((s) => s.metric === metric && (!tag || Object.entries(tag).every(([k, v]) => s.tags[k] === v)));
      return e ? Number(e.value) : null;
    };
    const added = promValue(metrics, "rtsd_datapoints_added_total");
    const now = Date.now();
    let rate = "measuring…";
    if (lastAdded && now > lastAdded.at) rate = ((added - lastAdded.added) / ((now - lastAdded.at) / 1000)).toFixed(1) + " points/s";
    lastAdded = { added, at: now };
    rows.push(["Ingest rate", rate]);
    rows.push(["Points written since start", String(added)]);
    // rtsd on HBase leaves rtsd_series out: its series index is shared by every node and not counted.
    const series = promValue(metrics, "rtsd_series");
    rows.push(["Series", series === null ? "not counted (series index shared on HBase)" : String(series)]);
    for (const kind of ["metrics", "tagk", "tagv"]) rows.push([`UIDs: ${kind}`, String(stat("tsd.uid.ids-used", { kind }))]);
    rows.push(["Disk use", humanBytes(promValue(metrics, "rtsd_disk_bytes") || 0)]);
    rows.push(["Connections open", String(promValue(metrics, "rtsd_connections_open"))]);
    rows.push(["Put errors", String(promValue(metrics, "rtsd_put_errors_total"))]);
  } catch (e) {
    rows.push(["Error", e.message]);
  }
  const body = $("#status tbody");
  body.textContent = "";
  for (const [k, v] of rows) {
    const tr = document.createElement("tr");
    const th = document.createElement("th");
    th.textContent = k;
    const td = document.createElement("td");
    td.textContent = v;
    td.dataset.name = k;
    tr.append(th, td);
    body.appendChild(tr);
  }
}

function showTab(name) {
  $("#graph-view").hidden = name !== "graph";
  $("#status-view").hidden = name !== "status";
  $("#tab-graph").classList.toggle("active", name === "graph");
  $("#tab-status").classList.toggle("active", name === "status");
  clearInterval(statusTimer);
  if (name === "status") {
    refreshStatus();
    statusTimer = setInterval(refreshStatus, 5000);
  } else {
    draw();
  }
}

// ---------------------------------------------------------------------------------------------------------------

function debounce(f, ms) {
  let t = null;
  return (...args) => {
    clearTimeout(t);
    t = setTimeout(() => f(...args), ms);
  };
}

async function main() {
  try {
    aggregators = (await api("api/aggregators")).slice().sort();
  } catch (e) {
    showError(e);
  }
  api("api/version").then((v) => { $("#version").textContent = `rtsd ${v.version || ""}`; }).catch(() => {});
  const hasQuery = readHash();
  $("#query-form").addEventListener("submit", (e) => {
    e.preventDefault();
    runQuery(true);
    scheduleRefresh();
  });
  $("#add-metric").addEventListener("click", () => addMetricPanel());
  for (const b of $$(".presets button")) {
    b.addEventListener("click", () => {
      $("#start").value = b.dataset.range;
      $("#end").value = "";
      runQuery(true);
    });
  }
  $("#autoreload").addEventListener("change", () => {
    writeHash(false);
    scheduleRefresh();
  });
  $("#tab-graph").addEventListener("click", () => showTab("graph"));
  $("#tab-status").addEventListener("click", () => showTab("status"));
  const chart = $("#chart");
  chart.addEventListener("mousemove", onHover);
  chart.addEventListener("mouseleave", () => { $("#tooltip").hidden = true; draw(); });
  window.addEventListener("resize", debounce(() => draw(), 100));
  window.addEventListener("popstate", () => {
    if (readHash()) runQuery(false);
    scheduleRefresh();
  });
  if (hasQuery) runQuery(false);
  scheduleRefresh();
  document.body.dataset.ready = "true";
}

main();
