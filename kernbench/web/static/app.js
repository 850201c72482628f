// kernbench web: draws /data.json — the machine (SVG), the run report (tables) and the timeline (canvas).
// Plain JavaScript, no library: the page is served with a policy that allows nothing but its own files.
"use strict";

const SVG = "http://www.w3.org/2000/svg";

function el(tag, attributes, parent) {
  const node = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attributes || {})) node.setAttribute(key, value);
  if (parent) parent.appendChild(node);
  return node;
}

function html(tag, text, parent, className) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = text;
  if (className) node.className = className;
  if (parent) parent.appendChild(node);
  return node;
}

// ---- units ------------------------------------------------------------------------------------

function formatPs(ps) {
  const units = [["s", 1e12], ["ms", 1e9], ["us", 1e6], ["ns", 1e3]];
  for (const [unit, scale] of units) if (ps >= scale) return (ps / scale).toFixed(3) + " " + unit;
  return Math.round(ps) + " ps";
}

function formatInt(n) { return Number(n).toLocaleString("en-US"); }

// ---- tooltip ----------------------------------------------------------------------------------

const tooltip = document.getElementById("tooltip");

function showTip(text, x, y) {
  tooltip.textContent = text;
  tooltip.hidden = false;
  const pad = 14;
  const box = tooltip.getBoundingClientRect();
  const left = x + pad + box.width > window.innerWidth ? x - pad - box.width : x + pad;
  const top = y + pad + box.height > window.innerHeight ? y - pad - box.height : y + pad;
  tooltip.style.left = Math.max(0, left) + "px";
  tooltip.style.top = Math.max(0, top) + "px";
}

function hideTip() { tooltip.hidden = true; }

// ---- the machine ------------------------------------------------------------------------------

function drawMachine(machine, utilization, scale) {
  // Every resource the run measured is filled (or, a link, stroked) with the colour page_data gives it on the
  // one utilization scale; one it never used is scale.idle. Without a run, the machine as described.
  const svg = document.getElementById("machine");
  const tips = new Map();
  const links = utilization.links || {}, memories = utilization.memories || {}, pes = utilization.pes || {};
  const painted = [links, memories, pes].some((kind) => Object.keys(kind).length > 0);
  const paint = (uses, name) => uses[name] || (painted ? {fill: scale.idle, tip: "idle in this run"} : null);
  const defs = el("defs", {}, svg);
  const marker = el("marker", {id: "arrow", viewBox: "0 0 6 6", refX: "5", refY: "3", markerWidth: "4",
                               markerHeight: "4", orient: "auto-start-reverse"}, defs);
  el("path", {d: "M0,0 L6,3 L0,6 z", fill: "#4b5563"}, marker);

  const box = (item, cls, label, centred, attributes, use) => {
    const rect = el("rect", {x: item.x, y: item.y, width: item.w, height: item.h, rx: 6, class: cls, ...attributes}, svg);
    tips.set(rect, item.tip + (use ? "\n" + use.tip : ""));
    const at = centred ? {x: item.x + item.w / 2, y: item.y + item.h / 2 + 4, "text-anchor": "middle"}
                       : {x: item.x + 8, y: item.y + 18};
    if (label) {
      const text = el("text", {...at, class: "label"}, svg);
      text.textContent = label;
      if (use && use.ink) text.style.fill = use.ink;
    }
    return rect;
  };
  const named = (kind, name, use, fallback) => ({"data-kind": kind, "data-name": name, fill: use ? use.fill : fallback});
  box(machine.host, "host", "host");
  for (const sw of machine.switch || []) box(sw, "switch", "switch", true);
  for (const sip of machine.sips) box(sip, "sip", sip.name);
  for (const cube of machine.cubes) {
    const use = paint(memories, cube.resource);
    box(cube, "cube", cube.name.split(".")[1], true, named("hbm", cube.resource, use, "#ffffff"), use);
  }
  for (const memory of machine.memories || []) {
    const use = paint(memories, memory.name);
    box(memory, "memory", memory.label, true, named(memory.kind, memory.name, use, "#f1f5f9"), use);
  }
  for (const link of machine.links) {
    const [a, b, c] = link.path;
    const d = c ? `M${a[0]},${a[1]} Q${b[0]},${b[1]} ${c[0]},${c[1]}` : `M${a[0]},${a[1]} L${b[0]},${b[1]}`;
    const use = paint(links, link.name);
    const path = el("path", {d, class: "link", "data-kind": "link", "data-name": link.name,
                             stroke: use ? use.fill : "#6b7280", "marker-end": "url(#arrow)"}, svg);
    tips.set(path, link.tip + (use ? "\n" + use.tip : ""));
  }
  for (const pe of machine.pes) {
    const use = paint(pes, pe.name);
    const circle = el("circle", {cx: pe.x, cy: pe.y, r: pe.r, class: "pe", ...named("pe", pe.name, use, "#60a5fa")}, svg);
    tips.set(circle, pe.tip + (use ? "\n" + use.tip : ""));
  }
  if (machine.sips_drawn < machine.n_sips) {
    el("text", {x: 0, y: machine.height - 8, class: "label"}, svg).textContent =
      `the first ${machine.sips_drawn} of ${machine.n_sips} SIPs are drawn`;
  }

  svg.addEventListener("mousemove", (event) => {
    const text = tips.get(event.target);
    if (text) showTip(text, event.clientX, event.clientY); else hideTip();
  });
  svg.addEventListener("mouseleave", hideTip);
  panZoom(svg, {x: -20, y: -20, w: machine.width + 40, h: machine.height + 40});
  drawLegend(machine, painted, scale);
}

function drawLegend(machine, painted, scale) {
  const legend = document.getElementById("legend");
  if (!painted) {
    html("span", "no run given: the machine as described (kernbench web REPORT.json TRACE.json paints a run on it)", legend);
    return;
  }
  html("span", "utilization:", legend);
  html("span", "", legend, "idle").style.background = scale.idle;
  html("span", "idle", legend);
  html("span", "0%", legend);
  const ramp = html("span", "", legend, "ramp");
  // A CSS gradient interpolates in sRGB between its stops, as the scale does: the ramp at u is a resource's
  // fill at u.
  ramp.style.background = `linear-gradient(90deg, ${scale.stops.map(([u, c]) => `${c} ${100 * u}%`).join(", ")})`;
  ramp.dataset.stops = JSON.stringify(scale.stops);
  html("span", "100% of the run", legend);
  const l2 = (machine.memories || []).some((memory) => memory.kind === "l2") ? ", L2: the SIP's L2" : "";
  html("span", `· cube: its HBM stack, inner box: its SRAM${l2}, circle: a PE (its busiest unit), line: a link`,
       legend);
}

function panZoom(svg, fit) {
  let view = {...fit};
  const apply = () => svg.setAttribute("viewBox", `${view.x} ${view.y} ${view.w} ${view.h}`);
  const toUser = (event) => {
    const rect = svg.getBoundingClientRect();
    const scale = Math.max(view.w / rect.width, view.h / rect.height);  // preserveAspectRatio: meet
    const offsetX = (rect.width * scale - view.w) / 2, offsetY = (rect.height * scale - view.h) / 2;
    return [view.x - offsetX + (event.clientX - rect.left) * scale, view.y - offsetY + (event.clientY - rect.top) * scale, scale];
  };
  svg.addEventListener("wheel", (event) => {
    event.preventDefault();
    const [ux, uy] = toUser(event);
    const factor = Math.pow(1.0015, event.deltaY);
    view = {x: ux - (ux - view.x) * factor, y: uy - (uy - view.y) * factor, w: view.w * factor, h: view.h * factor};
    apply();
  }, {passive: false});
  let drag = null;
  svg.addEventListener("mousedown", (event) => { drag = {x: event.clientX, y: event.clientY, view: {...view}}; });
  window.addEventListener("mouseup", () => { drag = null; });
  window.addEventListener("mousemove", (event) => {
    if (!drag) return;
    const scale = toUser(event)[2];
    view = {...drag.view, x: drag.view.x - (event.clientX - drag.x) * scale, y: drag.view.y - (event.clientY - drag.y) * scale};
    apply();
  });
  svg.addEventListener("dblclick", () => { view = {...fit}; apply(); });
  apply();
}

// ---- the timeline -----------------------------------------------------------------------------

const ROW_H = 16, AXIS_H = 22, LABEL_W = 190, MAX_CANVAS_ROWS = 400;

function drawTimeline(timeline) {
  const canvas = document.getElementById("timeline");
  const info = document.getElementById("timeline-info");
  if (!timeline || !timeline.rows.length) {
    info.textContent = "no timeline: give the run's trace (kernbench run --trace TRACE.json) or its report";
    canvas.height = 0;
    return;
  }
  const rows = timeline.rows.slice(0, MAX_CANVAS_ROWS);
  for (const row of rows) row.longest = row.ops.reduce((m, op) => Math.max(m, op[1] - op[0]), 0);
  const end = Math.max(timeline.end_ps, 1);
  let t0 = 0, t1 = end;
  const cut = timeline.ops_shown < timeline.ops_total
    ? ` (the first ${formatInt(timeline.ops_shown)} of ${formatInt(timeline.ops_total)} ops)` : "";
  const hidden = timeline.rows.length > rows.length ? `; ${timeline.rows.length - rows.length} more rows not drawn` : "";
  const ctx = canvas.getContext("2d");
  const height = AXIS_H + rows.length * ROW_H + 4;

  function draw() {
    const ratio = window.devicePixelRatio || 1;
    const width = canvas.clientWidth || 800;
    canvas.style.height = height + "px";
    canvas.width = Math.round(width * ratio);
    canvas.height = Math.round(height * ratio);
    ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
    ctx.clearRect(0, 0, width, height);
    ctx.font = "11px system-ui, sans-serif";
    const plot = width - LABEL_W - 8;
    const scale = plot / (t1 - t0);
    // axis
    ctx.fillStyle = "#6b7280";
    ctx.strokeStyle = "#e5e7eb";
    const step = niceStep((t1 - t0) / 8);
    for (let t = Math.ceil(t0 / step) * step; t <= t1; t += step) {
      const x = LABEL_W + (t - t0) * scale;
      ctx.beginPath(); ctx.moveTo(x, AXIS_H - 4); ctx.lineTo(x, height); ctx.stroke();
      ctx.fillText(formatPs(t), x + 2, 12);
    }
    rows.forEach((row, index) => {
      const y = AXIS_H + index * ROW_H;
      ctx.fillStyle = index % 2 ? "#f9fafb" : "#ffffff";
      ctx.fillRect(0, y, width, ROW_H);
      ctx.fillStyle = "#374151";
      ctx.fillText(row.name.length > 30 ? row.name.slice(0, 29) + "…" : row.name, 4, y + 12);
      let lastX = -1;
      for (let i = firstVisible(row, t0); i < row.ops.length; i++) {
        const op = row.ops[i];
        if (op[0] > t1) break;
        if (op[1] < t0) continue;
        const x = LABEL_W + Math.max(0, (op[0] - t0) * scale);
        const w = Math.max(1, (Math.min(op[1], t1) - Math.max(op[0], t0)) * scale);
        if (w < 1.5 && Math.floor(x) === lastX) continue;  // one pixel already painted
        lastX = Math.floor(x);
        ctx.fillStyle = colourOf(op[2]);
        ctx.fillRect(x, y + 2, w, ROW_H - 4);
      }
    });
    canvas.dataset.t0 = String(t0);
    canvas.dataset.t1 = String(t1);
    info.textContent = `${formatPs(t0)} to ${formatPs(t1)} of ${formatPs(end)}; ${rows.length} rows${cut}${hidden}`;
  }

  function timeAt(event) {
    const rect = canvas.getBoundingClientRect();
    const plot = rect.width - LABEL_W - 8;
    return t0 + (event.clientX - rect.left - LABEL_W) / plot * (t1 - t0);
  }

  canvas.addEventListener("wheel", (event) => {
    event.preventDefault();
    const t = Math.min(Math.max(timeAt(event), t0), t1);
    const factor = Math.pow(1.002, event.deltaY);
    const span = Math.min(end, Math.max(1, (t1 - t0) * factor));
    t0 = Math.max(0, t - (t - t0) / (t1 - t0) * span);
    t1 = Math.min(end, t0 + span);
    t0 = Math.max(0, t1 - span);
    draw();
  }, {passive: false});
  let drag = null;
  canvas.addEventListener("mousedown", (event) => { drag = {x: event.clientX, t0, t1}; });
  window.addEventListener("mouseup", () => { drag = null; });
  window.addEventListener("mousemove", (event) => {
    if (drag) {
      const rect = canvas.getBoundingClientRect();
      const shift = (event.clientX - drag.x) / (rect.width - LABEL_W - 8) * (drag.t1 - drag.t0);
      const span = drag.t1 - drag.t0;
      t0 = Math.min(Math.max(0, drag.t0 - shift), end - span);
      t1 = t0 + span;
      draw();
    }
  });
  canvas.addEventListener("mousemove", (event) => {
    if (drag) return;
    const rect = canvas.getBoundingClientRect();
    const index = Math.floor((event.clientY - rect.top - AXIS_H) / ROW_H);
    const row = rows[index];
    const t = timeAt(event);
    const tolerance = 2 / ((rect.width - LABEL_W - 8) / (t1 - t0));
    const op = row && row.ops.slice(firstVisible(row, t - tolerance)).find((o) => o[0] <= t + tolerance && o[1] >= t - tolerance);
    if (op) showTip(`${timeline.labels[op[2]]}\n${row.name}\n${formatPs(op[0])} to ${formatPs(op[1])} (${formatPs(op[1] - op[0])})`,
                    event.clientX, event.clientY);
    else hideTip();
  });
  canvas.addEventListener("mouseleave", hideTip);
  canvas.addEventListener("dblclick", () => { t0 = 0; t1 = end; draw(); });
  window.addEventListener("resize", draw);
  draw();
}

function firstVisible(row, t) {
  // ops are sorted by start; none starting before t - longest can reach t
  let lo = 0, hi = row.ops.length;
  const from = t - row.longest;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (row.ops[mid][0] < from) lo = mid + 1; else hi = mid;
  }
  return lo;
}

function niceStep(raw) {
  const power = Math.pow(10, Math.floor(Math.log10(Math.max(raw, 1e-9))));
  for (const m of [1, 2, 5, 10]) if (m * power >= raw) return m * power;
  return 10 * power;
}

function colourOf(index) { return `hsl(${(index * 47) % 360}, 60%, 58%)`; }

// ---- the report -------------------------------------------------------------------------------

function table(parent, columns, rows) {
  const t = html("table", null, parent);
  const head = html("tr", null, html("thead", null, t));
  for (const [title, , kind] of columns) html("th", title, head, kind === "text" ? "text" : "");
  const body = html("tbody", null, t);
  for (const row of rows) {
    const tr = html("tr", null, body);
    for (const [, value, kind] of columns) html("td", value(row), tr, kind === "text" ? "text" : "");
  }
  return t;
}

function drawReport(report, subtitle) {
  const root = document.getElementById("report");
  if (!report) {
    html("p", "no run report given (kernbench run BENCH --json REPORT.json writes one)", root, "empty");
    return;
  }
  subtitle.textContent = `${report.topology} · simulated time ${formatPs(report.total_time_ps)} · ` +
    `${formatInt(report.ops)} ops${report.timing_only ? " · timing only" : ""}`;
  const pct = (x) => (100 * x).toFixed(1) + "%";
  html("h3", "per device", root);
  table(root, [["device", (r) => r[0], "text"], ["busy from", (r) => formatPs(r[1].first_ps)],
               ["to", (r) => formatPs(r[1].last_ps)], ["ops", (r) => formatInt(r[1].ops)]], Object.entries(report.devices));
  html("h3", "bytes moved per link class", root);
  table(root, [["class", (r) => r[0], "text"], ["bytes", (r) => formatInt(r[1])]], Object.entries(report.bytes_by_link_class));
  html("h3", "busiest resources", root);
  table(root, [["resource", (r) => r.resource, "text"], ["kind", (r) => r.kind, "text"], ["busy", (r) => formatPs(r.busy_ps)],
               ["utilization", (r) => pct(r.utilization)], ["bytes", (r) => formatInt(r.bytes)]], report.busiest_resources);
  if ((report.kernels || []).length) {
    html("h3", "kernels (against the SIP's roofline)", root);
    table(root, [["kernel", (r) => r.kernel, "text"], ["device", (r) => r.device, "text"], ["programs", (r) => formatInt(r.programs)],
                 ["time", (r) => formatPs(r.time_ps)], ["bytes", (r) => formatInt(r.bytes)], ["GB/s", (r) => r.gb_per_s.toFixed(1)],
                 ["TFLOP/s", (r) => r.tflop_per_s.toFixed(3)], ["bound", (r) => r.bound, "text"],
                 ["of roofline", (r) => pct(r.of_roofline)]], report.kernels);
  }
  if ((report.collectives || []).length) {
    html("h3", "collectives (busbw uses nccl-tests' factors)", root);
    table(root, [["label", (r) => r.label, "text"], ["algorithm", (r) => r.algorithm, "text"], ["ranks", (r) => r.world_size],
                 ["bytes", (r) => formatInt(r.bytes)], ["type", (r) => r.dtype, "text"], ["time", (r) => formatPs(r.time_ps)],
                 ["algbw GB/s", (r) => r.algbw_gb_per_s.toFixed(3)], ["busbw GB/s", (r) => r.busbw_gb_per_s.toFixed(3)]],
          report.collectives);
  }
  for (const hazard of report.hazards || []) html("p", "hazard: " + hazard.message, root, "warning");
}

// ---- start ------------------------------------------------------------------------------------

async function main() {
  const subtitle = document.getElementById("subtitle");
  const response = await fetch("data.json");
  const data = await response.json();
  subtitle.textContent = data.machine.topology;
  drawMachine(data.machine, data.utilization, data.scale);
  drawTimeline(data.timeline);
  drawReport(data.report, subtitle);
  document.body.dataset.ready = "true";
}

main();
