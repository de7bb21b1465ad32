// The dashboard: one self-contained page (no external scripts, styles or fonts) that reads /v1/cluster once
// a second and draws nodes by leaf switch, chips coloured by job, TP groups outlined and unhealthy chips
// marked.
#include "ascend/scheduler/server.h"

namespace ascend::scheduler {

const std::string& dashboard_html() {
  static const std::string kPage = R"HTML(<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>ascend-scheduler</title>
<style>
body { font-family: sans-serif; margin: 1em; background: #fafafa; color: #222; }
h1 { font-size: 1.3em; margin: 0 0 .3em 0; }
#summary { margin-bottom: .8em; }
.leaf { border: 1px solid #bbb; border-radius: 6px; padding: .4em; margin: .4em 0; background: #fff; }
.leaf > .title { font-weight: bold; font-size: .9em; margin-bottom: .3em; }
.node { display: inline-block; vertical-align: top; border: 1px solid #ddd; border-radius: 4px; margin: .2em;
        padding: .3em; background: #f4f4f4; }
.node > .title { font-size: .8em; margin-bottom: .2em; }
.node.silent > .title::after { content: " (no report)"; color: #999; }
.chip { display: inline-block; width: 26px; height: 26px; margin: 1px; border-radius: 3px; font-size: 10px;
        line-height: 26px; text-align: center; background: #e0e0e0; color: #333; position: relative; }
.chip.busy { background: #9e9e9e; color: #fff; }
.chip.unhealthy { background: repeating-linear-gradient(45deg, #e53935, #e53935 4px, #ffcdd2 4px, #ffcdd2 8px);
                  color: #fff; font-weight: bold; }
.chip.unhealthy::after { content: "\2715"; position: absolute; right: 1px; top: -9px; font-size: 9px; color: #b71c1c; }
.chip > .util { position: absolute; left: 0; bottom: 0; width: 4px; background: #1b5e20;
                border-radius: 0 2px 0 3px; }
.chip > .hbm { position: absolute; left: 0; top: 0; height: 3px; background: #0d47a1; border-radius: 3px 2px 0 0; }
.chip.isolated { outline: 2px dashed #4a148c; outline-offset: -1px; }
tr.job.Recovering td { background: #fff3e0; }
tr.job.Failed td { background: #ffebee; }
.tp-group { display: inline-block; border: 2px solid #333; border-radius: 5px; padding: 1px; margin: 1px; }
table { border-collapse: collapse; font-size: .85em; margin-top: .6em; }
td, th { border: 1px solid #ccc; padding: 2px 6px; text-align: left; }
.swatch { display: inline-block; width: 12px; height: 12px; border-radius: 2px; vertical-align: middle; }
#error { color: #b71c1c; }
</style>
</head>
<body>
<h1>ascend-scheduler</h1>
<div id="summary">loading...</div>
<div id="error"></div>
<div id="leaves"></div>
<table id="jobs"><thead><tr><th></th><th>job</th><th>state</th><th>restarts</th><th>tp x pp x dp</th><th>pods</th>
<th>bound</th><th>running</th><th>comm. cost (s)</th><th>TP groups outside HCCS</th></tr></thead><tbody></tbody>
</table>
<script>
"use strict";
function colour(key) {
  let h = 0;
  for (const c of key) h = (h * 31 + c.charCodeAt(0)) >>> 0;
  return "hsl(" + (h % 360) + ", 65%, 55%)";
}
function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}
function chipEl(c) {
  const e = el("div", "chip " + c.state + (c.unhealthy ? " unhealthy" : "") + (c.isolated ? " isolated" : ""),
               String(c.phy));
  e.dataset.phy = c.phy;
  e.dataset.state = c.state;
  let tip = "chip " + c.phy + ": " + c.state + (c.unhealthy ? ", unhealthy" : "") +
      (c.isolated ? ", isolated (ascend-scheduler isolate --clear)" : "");
  if (c.job) { e.dataset.job = c.job; e.style.background = c.unhealthy ? "" : colour(c.job); e.style.color = "#fff";
               tip += ", job " + c.job + ", rank " + c.rank + ", pod " + c.pod; }
  else if (c.pod) { e.dataset.pod = c.pod; e.style.background = c.unhealthy ? "" : colour(c.pod); e.style.color = "#fff";
                    tip += ", pod " + c.pod; }
  // The plugin's telemetry: AICore use as a bar up the left edge, on-chip memory in use across the top.
  if (c.aicore_pct !== undefined) {
    e.dataset.util = c.aicore_pct;
    const u = el("div", "util");
    u.style.height = c.aicore_pct + "%";
    e.appendChild(u);
    tip += ", AICore " + c.aicore_pct + "%";
  }
  if (c.hbm_total_mb !== undefined) {
    const pct = Math.round(100 * c.hbm_used_mb / c.hbm_total_mb);
    e.dataset.hbm = pct;
    const h = el("div", "hbm");
    h.style.width = pct + "%";
    e.appendChild(h);
    tip += ", HBM " + (c.hbm_used_mb / 1024).toFixed(1) + " / " + (c.hbm_total_mb / 1024).toFixed(1) + " GiB";
  }
  e.title = tip;
  return e;
}
function nodeEl(n) {
  const box = el("div", "node" + (n.reported ? "" : " silent"));
  box.dataset.node = n.name;
  box.appendChild(el("div", "title", n.name + " \u00b7 " + n.profile));
  // Chips of one TP group of one job are drawn together inside an outline, in the order of their first chip.
  const groups = new Map();
  const items = [];
  for (const c of n.chips) {
    if (c.job !== undefined && c.tp_group !== undefined) {
      const key = c.job + "#" + c.tp_group;
      if (!groups.has(key)) { const g = { job: c.job, tp: c.tp_group, chips: [] }; groups.set(key, g); items.push(g); }
      groups.get(key).chips.push(c);
    } else {
      items.push(c);
    }
  }
  for (const it of items) {
    if (it.chips) {
      const g = el("div", "tp-group");
      g.dataset.job = it.job;
      g.dataset.tpGroup = it.tp;
      g.style.borderColor = colour(it.job);
      g.title = it.job + ": TP group " + it.tp;
      for (const c of it.chips) g.appendChild(chipEl(c));
      box.appendChild(g);
    } else {
      box.appendChild(chipEl(it));
    }
  }
  return box;
}
function render(v) {
  const c = v.chips;
  document.getElementById("summary").textContent = v.name + ": " + v.nodes.length + " nodes, " + c.free +
      " chips free, " + c.used + " used, " + c.unhealthy + " unhealthy (" + (c.isolated || 0) + " isolated); " +
      v.jobs.length + " jobs, " + v.jobs.filter((j) => j.state === "Recovering").length + " recovering";
  const leaves = new Map();
  for (const n of v.nodes) {
    if (!leaves.has(n.leaf)) leaves.set(n.leaf, { spine: n.spine, nodes: [] });
    leaves.get(n.leaf).nodes.push(n);
  }
  const root = document.getElementById("leaves");
  const frag = document.createDocumentFragment();
  for (const [name, l] of leaves) {
    const box = el("div", "leaf");
    box.dataset.leaf = name;
    box.appendChild(el("div", "title", name + " (" + l.spine + ")"));
    for (const n of l.nodes) box.appendChild(nodeEl(n));
    frag.appendChild(box);
  }
  root.replaceChildren(frag);
  const body = document.querySelector("#jobs tbody");
  const rows = document.createDocumentFragment();
  for (const j of v.jobs) {
    const tr = el("tr", "job " + (j.state || ""));
    const key = j.namespace + "/" + j.name;
    tr.dataset.job = key;
    const sw = el("td");
    const s = el("span", "swatch");
    s.style.background = colour(key);
    sw.appendChild(s);
    tr.appendChild(sw);
    for (const t of [key, j.state, j.restarts, j.tp + " x " + j.pp + " x " + j.dp, j.pods + " x " + j.chips_per_pod, j.bound,
                     j.allocated, j.cost.total.toPrecision(3), j.tp_groups_outside_hccs]) {
      tr.appendChild(el("td", "", String(t)));
    }
    rows.appendChild(tr);
  }
  body.replaceChildren(rows);
  document.body.dataset.ready = "1";
}
async function refresh() {
  try {
    const r = await fetch("/v1/cluster", { cache: "no-store" });
    if (!r.ok) throw new Error("HTTP " + r.status);
    render(await r.json());
    document.getElementById("error").textContent = "";
  } catch (e) {
    document.getElementById("error").textContent = "cannot read /v1/cluster: " + e.message;
  }
}
refresh();
setInterval(refresh, 1000);
</script>
</body>
</html>
)HTML";
  return kPage;
}

}  // namespace ascend::scheduler
