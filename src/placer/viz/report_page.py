"""The HTML report's page: markup, style and the script that draws every figure from the report's
JSON with Plotly (all inlined by :func:`page`; nothing is fetched when the page is viewed).

The script builds figures in the browser from compact arrays (bars, memory lines, placements as
strings), so the file holds each placement's data once, not once per figure. Names from the graph
reach the DOM through ``textContent`` only, and hover texts are HTML-escaped."""

from __future__ import annotations

import html

STYLE = r"""
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:18px 28px;color:#222;max-width:1500px}
h1{font-size:1.35em;margin:0 0 4px} h2{font-size:1.1em;margin:26px 0 6px;border-bottom:1px solid #ddd;padding-bottom:3px}
.sub{color:#555;font-size:.92em} code{background:#f3f3f3;padding:1px 4px;border-radius:3px}
table.sortable{border-collapse:collapse;font-size:.88em;margin-top:6px}
table.sortable th,table.sortable td{border:1px solid #ddd;padding:3px 8px;text-align:right;white-space:nowrap}
table.sortable th{background:#f5f5f5;cursor:pointer;user-select:none}
table.sortable th[aria-sort=ascending]::after{content:" \25B2"} table.sortable th[aria-sort=descending]::after{content:" \25BC"}
table.sortable td:first-child,table.sortable th:first-child{text-align:left}
table.sortable tbody tr{cursor:pointer} table.sortable tbody tr:hover{background:#f0f6ff}
tr.best td{font-weight:600} tr.picked td{background:#fff4d6} td.oom{color:#b00}
.fig{width:100%;min-height:200px} .controls{margin:6px 0} select{font-size:.95em}
ul.notes{font-size:.88em;color:#444} .small{font-size:.85em;color:#555}
"""

SCRIPT = r"""
(function () {
"use strict";
var D = JSON.parse(document.getElementById("report-data").textContent);
var CFG = {displaylogo: false, responsive: true, typesetMath: false};
var ROLE = ["forward", "backward", "update"], ROLE_COL = ["#4C72B0", "#DD8452", "#55A868"];
var PAL = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"];
var ALPHA = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
var ND = D.devices.length;
var byName = {};
D.entries.forEach(function (e) { byName[e.name] = e; });

function devCol(d) { return d < PAL.length ? PAL[d] : "hsl(" + ((d * 47) % 360) + ",55%,50%)"; }
function esc(s) { return String(s).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;"); }
function ms(us) { return (us / 1000).toLocaleString("en-US", {maximumFractionDigits: 3}) + " ms"; }
function size(b) {
  var u = ["B", "KiB", "MiB", "GiB", "TiB"], k = 0;
  while (Math.abs(b) >= 1024 && k < u.length - 1) { b /= 1024; k++; }
  return b.toLocaleString("en-US", {maximumFractionDigits: 2}) + " " + u[k];
}
function decode(s) {
  var out = new Int32Array(s.length);
  for (var i = 0; i < s.length; i++) { var k = ALPHA.indexOf(s[i]); out[i] = k >= 0 ? k : s.charCodeAt(i) - 256; }
  return out;
}
function el(tag, text, cls) {
  var x = document.createElement(tag);
  if (text !== undefined && text !== null) x.textContent = text;
  if (cls) x.className = cls;
  return x;
}
function modName(i) { return D.modules[i] || "(no module)"; }

// ------------------------------------------------------------------ the table
function cell(tr, text, v, cls) {
  var td = el("td", text, cls);
  td.dataset.v = (v === null || v === undefined || (typeof v === "number" && !isFinite(v))) ? "" : String(v);
  tr.appendChild(td);
}
function buildTable() {
  var t = document.getElementById("table");
  var heads = [["method", "text"], ["step time", "num"], ["vs best 1 device", "num"], ["vs lower bound", "num"], ["OOM", "text"]];
  D.devices.forEach(function (d) { heads.push(["peak " + d, "num"]); });
  heads.push(["placements", "num"], ["sim calls", "num"], ["seconds", "num"]);
  var hr = t.tHead.insertRow();
  heads.forEach(function (h, k) {
    var th = el("th", h[0]);
    th.dataset.type = h[1];
    th.addEventListener("click", function () { sortTable(t, k); });
    hr.appendChild(th);
  });
  var body = t.tBodies[0];
  D.entries.forEach(function (e) {
    var r = e.row, tr = body.insertRow();
    tr.dataset.method = e.name;
    if (e.name === D.best) tr.className = "best";
    cell(tr, e.name + (e.name === D.best ? " *" : ""), e.name);
    cell(tr, ms(r.step_time_us), r.step_time_us);
    var sp = r.speedup_over_single, sd = D.single_device;
    cell(tr, sp ? sp.toFixed(2) + "x" : !sd.device ? "no single device" : !sd.fits ? "n/a: none fits alone" :
      r.oom ? "n/a: OOM" : "n/a", sp || null);
    var lb = D.lower_bound_us > 0 ? r.step_time_us / D.lower_bound_us : null;
    cell(tr, lb ? lb.toFixed(2) + "x" : "", lb);
    cell(tr, r.oom ? "OOM" : "", r.oom ? "OOM" : "", r.oom ? "oom" : "");
    r.peak_memory_bytes.forEach(function (b, d) {
      cell(tr, size(b), b, b > D.capacity[d] ? "oom" : "");
    });
    cell(tr, r.placements_sampled !== undefined ? r.placements_sampled.toLocaleString("en-US") : "", r.placements_sampled);
    cell(tr, r.sim_calls !== undefined ? r.sim_calls.toLocaleString("en-US") : "", r.sim_calls);
    cell(tr, r.wall_s !== undefined ? r.wall_s.toFixed(2) : "", r.wall_s);
    tr.addEventListener("click", function () { pick(e.name); });
  });
  D.errors.forEach(function (x) {
    var tr = body.insertRow();
    cell(tr, x.method, x.method);
    var td = el("td", "does not apply: " + x.error);
    td.colSpan = heads.length - 1; td.style.textAlign = "left"; td.dataset.v = "";
    tr.appendChild(td);
  });
}
function sortTable(t, col) {
  var ths = t.tHead.rows[0].cells, th = ths[col];
  var dir = th.getAttribute("aria-sort") === "ascending" ? -1 : 1;
  for (var i = 0; i < ths.length; i++) ths[i].removeAttribute("aria-sort");
  th.setAttribute("aria-sort", dir === 1 ? "ascending" : "descending");
  var num = th.dataset.type === "num";
  var rows = Array.prototype.slice.call(t.tBodies[0].rows);
  rows.sort(function (a, b) {
    var x = a.cells[col] ? a.cells[col].dataset.v : "", y = b.cells[col] ? b.cells[col].dataset.v : "";
    if (x === "" || y === "") return (x === "") - (y === "");  // blanks last either way
    if (num) return dir * (parseFloat(x) - parseFloat(y));
    return dir * x.localeCompare(y);
  });
  rows.forEach(function (r) { t.tBodies[0].appendChild(r); });
}

// ------------------------------------------------------------------ timeline
function lanes() {
  var L = [];
  D.devices.forEach(function (d) { L.push(d + " compute"); L.push(d + " send"); });
  return L;
}
function opHover(o, k) {
  var first = D.op_names[o.first[k]], dur = o.end[k] - o.start[k];
  if (o.n[k] === 1) {
    return "<b>" + esc(first) + "</b><br>module: " + esc(modName(o.module[k])) + "<br>" + ROLE[o.role[k]] +
      "<br>duration: " + ms(dur) + "<br>output: " + size(D.op_bytes[o.first[k]]);
  }
  return "<b>" + o.n[k] + " ops merged</b> from " + esc(first) + "<br>module (most time): " + esc(modName(o.module[k])) +
    "<br>busy " + ms(o.busy[k]) + " of " + ms(dur) + "<br>outputs: " + size(o.bytes[k]);
}
function sendHover(s, k) {
  var first = D.op_names[s.first[k]], dur = s.end[k] - s.start[k];
  if (s.n[k] === 1) {
    return "<b>transfer of " + esc(first) + "</b><br>module: " + esc(modName(D.op_module[s.first[k]])) +
      "<br>to " + esc(D.devices[s.dst[k]]) + "<br>duration: " + ms(dur) + "<br>bytes: " + size(s.bytes[k]);
  }
  return "<b>" + s.n[k] + " transfers merged</b>, first " + esc(first) + "<br>mostly to " + esc(D.devices[s.dst[k]]) +
    "<br>span " + ms(dur) + "<br>bytes: " + size(s.bytes[k]);
}
function timelineFig(e) {
  var L = lanes(), traces = [], o = e.ops, s = e.sends;
  for (var r = 0; r < 3; r++) {
    var base = [], x = [], y = [], text = [];
    for (var k = 0; k < o.start.length; k++) {
      if (o.role[k] !== r) continue;
      base.push(o.start[k] / 1000); x.push(Math.max(o.end[k] - o.start[k], 0) / 1000); y.push(L[2 * o.lane[k]]);
      text.push(opHover(o, k));
    }
    if (x.length) traces.push({type: "bar", orientation: "h", base: base, x: x, y: y, name: ROLE[r], width: 0.8,
      marker: {color: ROLE_COL[r]}, hovertext: text, hoverinfo: "text"});
  }
  var b2 = [], x2 = [], y2 = [], t2 = [];
  for (var j = 0; j < s.start.length; j++) {
    b2.push(s.start[j] / 1000); x2.push(Math.max(s.end[j] - s.start[j], 0) / 1000); y2.push(L[2 * s.lane[j] + 1]);
    t2.push(sendHover(s, j));
  }
  traces.push({type: "bar", orientation: "h", base: b2, x: x2, y: y2, name: "transfer", width: 0.5,
    marker: {color: "#8C8C8C"}, hovertext: t2, hoverinfo: "text"});
  var layout = {barmode: "overlay", height: 140 + 56 * ND, margin: {l: 10, r: 10, t: 40, b: 40},
    title: {text: esc(e.name) + ": step time " + ms(e.row.step_time_us), font: {size: 14}},
    xaxis: {title: {text: "time (ms)"}, range: [0, e.row.step_time_us / 1000 * 1.01]},
    yaxis: {type: "category", categoryorder: "array", categoryarray: L.slice().reverse(), range: [-0.5, L.length - 0.5],
      automargin: true}, legend: {orientation: "h", y: -0.25}, hovermode: "closest"};
  return [traces, layout];
}

// ------------------------------------------------------------------ memory
function memoryFig(e) {
  var traces = [], shapes = [], ann = [];
  var layout = {height: 90 + 150 * ND, margin: {l: 10, r: 10, t: 40, b: 40}, showlegend: false, hovermode: "closest",
    grid: {rows: ND, columns: 1, pattern: "coupled", roworder: "top to bottom"},
    title: {text: esc(e.name) + ": memory per device against capacity (peak marked)", font: {size: 14}}};
  var end = e.row.step_time_us / 1000;
  e.memory.forEach(function (m, d) {
    var ax = d === 0 ? "" : String(d + 1), gib = Math.pow(2, 30);
    var xs = m.t.map(function (v) { return v / 1000; }), ys = m.bytes.map(function (v) { return v / gib; });
    xs.push(Math.max(end, xs[xs.length - 1])); ys.push(ys[ys.length - 1]);
    traces.push({type: "scatter", mode: "lines", x: xs, y: ys, line: {shape: "hv", color: devCol(d), width: 1.5},
      name: D.devices[d], xaxis: "x", yaxis: "y" + ax, hovertemplate: "%{x:.3f} ms: %{y:.3f} GiB<extra>" + esc(D.devices[d]) + "</extra>"});
    traces.push({type: "scatter", mode: "lines", x: [0, Math.max(end, xs[xs.length - 1])], y: [m.capacity / gib, m.capacity / gib],
      line: {dash: "dash", color: "#b00", width: 1}, name: "capacity", xaxis: "x", yaxis: "y" + ax,
      hovertemplate: "capacity " + size(m.capacity) + "<extra></extra>"});
    traces.push({type: "scatter", mode: "markers+text", x: [m.peak_t / 1000], y: [m.peak / gib], marker: {symbol: "x", size: 10, color: "#000"},
      text: ["peak " + size(m.peak)], textposition: "top right", xaxis: "x", yaxis: "y" + ax, name: "peak",
      hovertemplate: "peak " + size(m.peak) + " at %{x:.3f} ms<extra>" + esc(D.devices[d]) + "</extra>"});
    var offScale = m.peak > 0 && m.capacity > 8 * m.peak, top = (offScale ? 1.5 * m.peak : Math.max(m.peak, m.capacity) * 1.08) / gib;
    layout["yaxis" + ax] = {title: {text: esc(D.devices[d]) + " (GiB)" + (offScale ? "<br>capacity " + size(m.capacity) + " off scale" : ""),
      font: {size: 11}}, range: [0, top || 1], automargin: true};
  });
  layout.xaxis = {title: {text: "time (ms)"}, range: [0, end * 1.02 || 1]};
  return [traces, layout];
}

// ------------------------------------------------------------------ where the ops went
function treeFig(e) {
  var T = D.tree, p = decode(e.placement), nn = T.ids.length;
  var share = new Float64Array(nn * ND), own = new Float64Array(nn);
  for (var i = 0; i < p.length; i++) { share[T.op_node[i] * ND + p[i]] += D.op_size[i]; own[T.op_node[i]] += D.op_size[i]; }
  for (var n = nn - 1; n > 0; n--) { var q = T.parents[n]; for (var d = 0; d < ND; d++) share[q * ND + d] += share[n * ND + d]; }
  var ids = [], parents = [], colors = [], text = [], values = [];
  for (var k = 0; k < nn; k++) {
    ids.push("n" + k); parents.push(k === 0 ? "" : "n" + T.parents[k]); values.push(own[k]);
    var tot = 0, best = 0, lines = [];
    for (var d2 = 0; d2 < ND; d2++) { tot += share[k * ND + d2]; if (share[k * ND + d2] > share[k * ND + best]) best = d2; }
    for (var d3 = 0; d3 < ND; d3++) if (share[k * ND + d3] > 0) lines.push(esc(D.devices[d3]) + ": " + (100 * share[k * ND + d3] / tot).toFixed(0) + "%");
    colors.push(devCol(best));
    text.push("<b>" + esc(k === 0 ? D.graph : T.ids[k]) + "</b><br>compute " + ms(tot) + "<br>" + lines.join("<br>"));
  }
  var traces = [{type: "treemap", ids: ids, labels: T.labels.map(esc), parents: parents, values: values, branchvalues: "remainder",
    marker: {colors: colors}, hovertext: text, hoverinfo: "text", textinfo: "label", maxdepth: 4}];
  var legend = D.devices.map(function (nm, d) { return "<span style='color:" + devCol(d) + "'>\u25A0</span> " + esc(nm); }).join("  ");
  return [traces, {height: 560, margin: {l: 5, r: 5, t: 50, b: 5},
    title: {text: esc(e.name) + ": module tree sized by compute, coloured by the device holding most of it<br><span style='font-size:12px'>" + legend + "</span>", font: {size: 14}}}];
}
function stripFig(e) {
  var p = decode(e.placement), z = Array.prototype.slice.call(p), text = [];
  for (var i = 0; i < p.length; i++) text.push(esc(D.op_names[i]) + " on " + esc(D.devices[p[i]]));
  var scale = [];
  D.devices.forEach(function (nm, d) { scale.push([d / ND, devCol(d)]); scale.push([(d + 1) / ND, devCol(d)]); });
  var traces = [{type: "heatmap", z: [z], text: [text], hoverinfo: "text", zmin: -0.5, zmax: ND - 0.5, colorscale: scale,
    colorbar: {tickvals: D.devices.map(function (_, d) { return d; }), ticktext: D.devices.map(esc), len: 1}}];
  return [traces, {height: 200, margin: {l: 10, r: 10, t: 40, b: 40}, yaxis: {visible: false},
    xaxis: {title: {text: "ops in topological order"}}, title: {text: esc(e.name) + ": device of each op", font: {size: 14}}}];
}

// ------------------------------------------------------------------ search curves
function curvesFig() {
  var traces = [], xmax = 1;
  D.entries.forEach(function (e, k) {
    if (e.curve.length < 2 || e.curve[e.curve.length - 1][0] <= e.curve[0][0]) return;  // one placement: no search
    var xs = e.curve.map(function (c) { return Math.max(c[0], 1); }), ys = e.curve.map(function (c) { return c[1] / 1000; });
    xmax = Math.max(xmax, xs[xs.length - 1]);
    traces.push({type: "scatter", mode: "lines", x: xs, y: ys, name: e.name, line: {shape: "hv", color: e.colour},
      hovertemplate: "%{x} placements: %{y:.3f} ms<extra>" + esc(e.name) + "</extra>"});
  });
  if (!traces.length) return null;
  traces.push({type: "scatter", mode: "lines", x: [1, xmax], y: [D.lower_bound_us / 1000, D.lower_bound_us / 1000],
    name: "lower bound", line: {dash: "dash", color: "#000", width: 1}});
  return [traces, {height: 420, margin: {l: 10, r: 10, t: 40, b: 40}, hovermode: "closest",
    xaxis: {title: {text: "placements sampled"}, type: xmax > 100 ? "log" : "linear"},
    yaxis: {title: {text: "best objective so far (ms)"}, automargin: true},
    title: {text: "the cost of search: best objective found against placements sampled", font: {size: 14}}}];
}

// ------------------------------------------------------------------ what changed
function diffShow() {
  var a = byName[document.getElementById("diff-a").value], b = byName[document.getElementById("diff-b").value];
  var pa = decode(a.placement), pb = decode(b.placement), per = {}, nMoved = 0, sMoved = 0, total = 0;
  for (var i = 0; i < pa.length; i++) {
    total += D.op_size[i];
    if (pa[i] === pb[i]) continue;
    nMoved++; sMoved += D.op_size[i];
    var m = modName(D.op_module[i]), x = per[m] || (per[m] = {ops: 0, size: 0, moves: {}});
    x.ops++; x.size += D.op_size[i];
    var mv = D.devices[pa[i]] + " \u2192 " + D.devices[pb[i]];
    x.moves[mv] = (x.moves[mv] || 0) + 1;
  }
  var dt = b.row.step_time_us - a.row.step_time_us;
  var summary = document.getElementById("diff-summary");
  // a step time is compared only between placements that run: one that runs out of memory is said so
  var oom = a.row.oom || b.row.oom;
  summary.textContent = b.name + " against " + a.name + ": step time " + ms(a.row.step_time_us) + (a.row.oom ? " (runs out of memory)" : "") +
    " \u2192 " + ms(b.row.step_time_us) + (b.row.oom ? " (runs out of memory)" : "") +
    (oom ? " (not compared: " + (a.row.oom && b.row.oom ? "neither fits" : (a.row.oom ? a.name : b.name) + " does not fit") + ")" :
      " (" + (dt > 0 ? "+" : "") + ms(dt) + ", " + (a.row.step_time_us > 0 ? (100 * dt / a.row.step_time_us).toFixed(1) : "0") + "%)") +
    "; " + nMoved.toLocaleString("en-US") + " of " + pa.length.toLocaleString("en-US") + " ops moved (" +
    (total > 0 ? (100 * sMoved / total).toFixed(1) : "0") + "% of compute), in " + Object.keys(per).length + " modules.";
  summary.dataset.moved = String(nMoved);
  var rows = Object.keys(per).map(function (k) { return [k, per[k]]; });
  rows.sort(function (u, v) { return v[1].size - u[1].size || (u[0] < v[0] ? -1 : 1); });
  var t = document.getElementById("diff-table"), body = t.tBodies[0];
  while (body.rows.length) body.deleteRow(0);
  rows.slice(0, 40).forEach(function (r) {
    var tr = body.insertRow();
    cell(tr, r[0], r[0]); cell(tr, r[1].ops.toLocaleString("en-US"), r[1].ops); cell(tr, ms(r[1].size), r[1].size);
    cell(tr, Object.keys(r[1].moves).map(function (k) { return k + " \u00d7" + r[1].moves[k]; }).join(", "), "");
  });
  document.getElementById("diff-more").textContent = rows.length > 40 ? (rows.length - 40) + " more modules moved (the 40 with the most compute shown)" : "";
  var top = rows.slice(0, 20).reverse();
  var layout = {height: 120 + 22 * Math.max(top.length, 3), margin: {l: 10, r: 10, t: 40, b: 40},
    xaxis: {title: {text: "compute moved (ms, fastest device)"}}, yaxis: {automargin: true, type: "category"},
    title: {text: "modules that moved most compute", font: {size: 14}}};
  if (!top.length) layout.annotations = [{text: "no op moved", showarrow: false, xref: "paper", yref: "paper", x: 0.5, y: 0.5}];
  Plotly.react("fig-diff", [{type: "bar", orientation: "h", x: top.map(function (r) { return r[1].size / 1000; }),
    y: top.map(function (r) { return esc(r[0]); }), marker: {color: "#4C72B0"}, hovertemplate: "%{y}: %{x:.3f} ms<extra></extra>"}], layout, CFG);
}

// ------------------------------------------------------------------ page
function draw(id, fig) { return Plotly.react(id, fig[0], fig[1], CFG); }
function pick(name) {
  var e = byName[name];
  if (!e) return;
  document.getElementById("pick").value = name;
  var rows = document.getElementById("table").tBodies[0].rows;
  for (var i = 0; i < rows.length; i++) rows[i].classList.toggle("picked", rows[i].dataset.method === name);
  draw("fig-timeline", timelineFig(e));
  draw("fig-memory", memoryFig(e));
  draw("fig-tree", D.tree ? treeFig(e) : stripFig(e));
  var notes = document.getElementById("entry-notes");
  notes.textContent = "";
  e.notes.forEach(function (n) { notes.appendChild(el("li", n)); });
}
function fill(sel, value) {
  D.entries.forEach(function (e) { var o = el("option", e.name); o.value = e.name; sel.appendChild(o); });
  sel.value = value;
}
function main() {
  document.getElementById("meta").textContent = D.graph + ": " + D.n_ops.toLocaleString("en-US") + " ops, " +
    D.n_edges.toLocaleString("en-US") + " edges; cluster " + D.cluster + " (" + D.devices.join(", ") + "); lower bound on step time " +
    ms(D.lower_bound_us) + (D.lower_bound_source ? " (" + D.lower_bound_source + ")" : "") + "; best: " + D.best + (D.command ? "; made by: " + D.command : "");
  buildTable();
  var sd = D.single_device, single = document.getElementById("single");
  single.textContent = !sd.device ? "No single device can run every op: there is no single-device baseline." :
    !sd.fits ? "No single device fits: the fastest, " + sd.device + " alone (" + ms(sd.step_us) +
      "), runs out of memory, so no speed-up over one device is given." :
    "vs best 1 device: speed-up over the fastest single device that fits, " + sd.device + " alone (" + ms(sd.step_us) +
      "); under 1.02x the split buys under 2%.";
  var notes = document.getElementById("notes");
  D.notes.forEach(function (n) { notes.appendChild(el("li", n)); });
  D.entries.forEach(function (e) { e.notes.forEach(function (n) { notes.appendChild(el("li", e.name + ": " + n)); }); });
  if (!notes.childNodes.length) notes.appendChild(el("li", "nothing: every op, transfer and module is drawn"));
  document.getElementById("tree-what").textContent = D.tree ?
    "The model's module tree (module paths the capture records), box area = compute time on the fastest device; click a box to zoom." :
    "This graph records no modules: its ops in topological order, coloured by device.";
  fill(document.getElementById("pick"), D.best);
  document.getElementById("pick").addEventListener("change", function (ev) { pick(ev.target.value); });
  pick(D.best);
  var c = curvesFig();
  if (c) draw("fig-curves", c);
  else { var f = document.getElementById("fig-curves"); f.className = "small"; f.textContent = "No method here searched: each sampled one placement."; }
  fill(document.getElementById("diff-a"), D.diff_pair[0]);
  fill(document.getElementById("diff-b"), D.diff_pair[1]);
  document.getElementById("diff-a").addEventListener("change", diffShow);
  document.getElementById("diff-b").addEventListener("change", diffShow);
  var dt = document.getElementById("diff-table"), dh = dt.tHead.rows[0].cells;
  Array.prototype.forEach.call(dh, function (th, k) { th.addEventListener("click", function () { sortTable(dt, k); }); });
  diffShow();
  document.body.dataset.ready = "1";
}
main();
})();
"""

BODY = """
<h1 id="title"></h1>
<div class="sub" id="meta"></div>
<h2>Methods</h2>
<div class="small">Click a column to sort, a row to show that placement below. Step time: one simulated training step;
peak: the most memory a device holds during it; placements: how many the method simulated; seconds: its wall time.</div>
<table class="sortable" id="table"><thead></thead><tbody></tbody></table>
<div class="small" id="single"></div>
<h2>One placement</h2>
<div class="controls">Show: <select id="pick"></select></div>
<div class="small">Device timeline: ops (by role) and outgoing transfers per device over one step; hover for op, module,
duration and bytes; drag to zoom.</div>
<div id="fig-timeline" class="fig"></div>
<div id="fig-memory" class="fig"></div>
<div class="small" id="tree-what"></div>
<div id="fig-tree" class="fig"></div>
<ul class="notes" id="entry-notes"></ul>
<h2>Search</h2>
<div id="fig-curves" class="fig"></div>
<h2>What changed</h2>
<div class="controls">From <select id="diff-a"></select> to <select id="diff-b"></select></div>
<p id="diff-summary"></p>
<div id="fig-diff" class="fig"></div>
<table class="sortable" id="diff-table"><thead><tr><th data-type="text">module</th><th data-type="num">ops moved</th>
<th data-type="num">compute moved</th><th data-type="text">moves</th></tr></thead><tbody></tbody></table>
<div class="small" id="diff-more"></div>
<h2>What was aggregated</h2>
<ul class="notes" id="notes"></ul>
"""


def page(plotly_js: str, data_json: str, title: str) -> str:
    """The whole document. ``data_json`` must hold no ``<`` (written ``\\u003c``)."""
    t = html.escape(title)
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
            f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>{t}</title>\n"
            f"<style>{STYLE}</style>\n<script>{plotly_js}</script>\n</head><body>\n"
            + BODY.replace('<h1 id="title"></h1>', f'<h1 id="title">{t}</h1>')
            + f"<script type=\"application/json\" id=\"report-data\">{data_json}</script>\n"
            f"<script>{SCRIPT}</script>\n</body></html>\n")
