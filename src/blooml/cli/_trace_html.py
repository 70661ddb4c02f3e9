"""The self-contained HTML space-time viewer written by ``blooml trace html``.

One page, no external resources: the merged traces are embedded as JSON, a small script draws
them as SVG (one column per node, time flowing down, one circle per tick, one arrow per
message) and fills the side panel when a tick is clicked.
"""

from __future__ import annotations

import html
import json
from typing import Any

__all__ = ["page"]

_CSS = """
body{font-family:Helvetica,Arial,sans-serif;margin:0;display:flex;height:100vh;color:#222}
#diagram{flex:1 1 auto;overflow:auto;border-right:1px solid #ccc}
#side{flex:0 0 420px;overflow:auto;padding:12px 16px;font-size:13px;background:#fafbfc}
h1{font-size:16px;margin:10px 14px}
.legend{font-size:12px;color:#555;margin:0 14px 6px}
.tick{cursor:pointer;stroke:#2c3e50;stroke-width:1.5;fill:#fff}
.tick.work{fill:#cfe3f7}
.tick.err{fill:#f6c1c1;stroke:#d62728}
.tick.idle{fill:#eee;stroke:#aaa}
.tick.sel{stroke:#8e44ad;stroke-width:4}
.life{stroke:#b0b8c4;stroke-width:2}
.msg{stroke:#2a6fb0;stroke-width:1.4;fill:none}
.msg.dup{stroke-dasharray:5 3}
.msg.lost{stroke:#d62728;stroke-dasharray:3 3}
.nodename{font-weight:bold;font-size:13px}
.ticklbl{font-size:9px;fill:#333;pointer-events:none}
table{border-collapse:collapse;margin:4px 0 10px}
td,th{border:1px solid #ddd;padding:2px 6px;text-align:left;font-family:monospace;font-size:12px}
th{background:#eef}
.error{color:#b00;font-weight:bold}
h2{font-size:15px;margin:4px 0 8px}
h3{font-size:13px;margin:12px 0 4px}
code{font-size:12px}
"""

_JS = r"""
const D = JSON.parse(document.getElementById('trace-data').textContent);
const nodes = Object.keys(D.nodes);
const COLW = 200, ROWH = 34, TOP = 50, LEFT = 90;
const maxRow = Math.max(0, ...D.steps.map(s => s.row));
const W = LEFT + COLW * Math.max(nodes.length, 1), H = TOP + ROWH * (maxRow + 2);
const NS = 'http://www.w3.org/2000/svg';
function el(tag, attrs, parent) {
  const e = document.createElementNS(NS, tag);
  for (const k in attrs) e.setAttribute(k, attrs[k]);
  if (parent) parent.appendChild(e);
  return e;
}
const svg = el('svg', {width: W, height: H, id: 'spacetime'});
document.getElementById('diagram').appendChild(svg);
const defs = el('defs', {}, svg);
const mk = el('marker', {id: 'arrow', viewBox: '0 0 10 10', refX: 10, refY: 5,
  markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse'}, defs);
el('path', {d: 'M0,0 L10,5 L0,10 z', fill: '#2a6fb0'}, mk);
const X = n => LEFT + COLW * nodes.indexOf(n) + COLW / 2 - 40;
const Y = r => TOP + ROWH * r + 20;
nodes.forEach(n => {
  const t = el('text', {x: X(n), y: 24, 'text-anchor': 'middle', class: 'nodename'}, svg);
  t.textContent = n + (D.nodes[n].program ? ' (' + D.nodes[n].program + ')' : '');
  const rows = D.steps.filter(s => s.node === n).map(s => s.row);
  el('line', {x1: X(n), x2: X(n), y1: 34, y2: Y(Math.max(0, ...rows)) + 14, class: 'life'}, svg);
});
const byId = {};
D.steps.forEach(s => byId[s.id] = s);
D.arrows.forEach(a => {
  const s = byId[a.src];
  const x1 = X(s.node), y1 = Y(s.row);
  let x2, y2, cls = 'msg';
  if (a.dst === null) { x2 = x1 + 70; y2 = y1 + ROWH * 0.8; cls += ' lost'; }
  else { const d = byId[a.dst]; x2 = X(d.node); y2 = Y(d.row); if (a.dup) cls += ' dup'; }
  const dx = x2 - x1, dy = y2 - y1, len = Math.hypot(dx, dy) || 1;
  const line = el('line', {x1: x1 + dx / len * 10, y1: y1 + dy / len * 10,
    x2: x2 - dx / len * 11, y2: y2 - dy / len * 11, class: cls, 'marker-end': 'url(#arrow)',
    'data-chan': a.chan || ''}, svg);
  el('title', {}, line).textContent = (a.chan || '') + ' ' + JSON.stringify(a.row) +
    (a.msg ? '  [' + a.msg + ']' : '') + (a.dst === null ? '  (never received)' : '');
});
D.steps.forEach(s => {
  const busy = s.inputs.length || s.derives.length || s.sends.length || s.recvs.length;
  const cls = 'tick ' + (s.errors.length || s.ok === false ? 'err' : busy ? 'work' : 'idle');
  const g = el('g', {class: 'step'}, svg);
  const c = el('circle', {cx: X(s.node), cy: Y(s.row), r: 10, class: cls,
    'data-node': s.node, 'data-tick': s.tick, 'data-attempt': s.attempt,
    id: 'step-' + s.id}, g);
  el('title', {}, c).textContent = s.node + ' tick ' + s.tick +
    (s.attempt ? ' (attempt ' + (s.attempt + 1) + ')' : '') +
    (s.ok === false ? ', rolled back' : '');
  const lbl = el('text', {x: X(s.node), y: Y(s.row) + 3.5, 'text-anchor': 'middle',
    class: 'ticklbl'}, g);
  lbl.textContent = s.tick;
  c.addEventListener('click', () => show(s));
});
function esc(v) {
  return String(v).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}
function rowsTable(rows, more) {
  if (!rows || !rows.length) return '';
  let h = '<table>' + rows.map(r => '<tr>' + (Array.isArray(r) ? r : [r]).map(
    c => '<td>' + esc(JSON.stringify(c)) + '</td>').join('') + '</tr>').join('');
  if (more) h += '<tr><td colspan="99">... ' + more + ' more</td></tr>';
  return h + '</table>';
}
function show(s) {
  document.querySelectorAll('.tick.sel').forEach(e => e.classList.remove('sel'));
  document.getElementById('step-' + s.id).classList.add('sel');
  const rules = {};
  (D.nodes[s.node].rules || []).forEach(r => rules[r.index] = r);
  let h = '<h2 id="detail-title">' + esc(s.node) + ' tick ' + s.tick +
    (s.attempt ? ' (attempt ' + (s.attempt + 1) + ')' : '') + '</h2>';
  h += '<div>' + (s.ok === true ? 'committed' : s.ok === false ?
    '<span class="error">rolled back</span>' : 'not run in this trace') +
    (s.ms !== null ? ', ' + s.ms.toFixed(3) + ' ms' : '') +
    (s.now !== undefined && s.now !== null ? ', program clock ' + esc(s.now) : '') + '</div>';
  if (s.errors.length) {
    h += '<h3>errors</h3>';
    s.errors.forEach(e => h += '<div class="error">' + esc(e.type + ': ' + e.message) +
      (e.rule !== null ? ' (rule ' + e.rule + ', ' + esc(e.where) + ')' : '') + '</div>');
  }
  if (s.inputs.length) {
    h += '<h3>inputs</h3>';
    s.inputs.forEach(i => h += '<div><b>' + esc(i.coll) + '</b> ' + esc(i.kind) + ' ' + i.n +
      '</div>' + rowsTable(i.rows, i.more));
  }
  if (s.recvs.length) {
    h += '<h3>messages taken</h3>';
    s.recvs.forEach(r => h += '<div>' + esc(r.chan) + ' from ' + esc(r.from || '?') + ': <code>' +
      esc(JSON.stringify(r.row)) + '</code></div>');
  }
  h += '<h3>derivations</h3>';
  if (!s.derives.length) h += '<div>none</div>';
  s.derives.forEach(d => {
    const r = rules[d.rule] || {};
    h += '<div class="derive"><b>r' + d.rule + '</b> ' + esc(d.head + ' ' + d.op) +
      ' &mdash; ' + d.n + ' rows' + (d.new !== null ? ', ' + d.new + ' new' : '') +
      ' <small>[' + esc(r.where || '') + ', stratum ' + esc(d.stratum) + ']</small><br><code>' +
      esc(r.text || '') + '</code></div>' + rowsTable(d.rows, d.more);
  });
  if (s.sends.length) {
    h += '<h3>messages sent</h3>';
    s.sends.forEach(m => h += '<div>' + esc(m.chan) + ' to ' + esc(m.to) + ': <code>' +
      esc(JSON.stringify(m.row)) + '</code></div>');
  }
  if (s.strata.length) {
    h += '<h3>time per stratum</h3><table>' + s.strata.map(t => '<tr><td>' + esc(t.stratum) +
      '</td><td>' + t.ms.toFixed(3) + ' ms</td></tr>').join('') + '</table>';
  }
  document.getElementById('detail').innerHTML = h;
}
"""


def page(merged: Any, title: str) -> str:
    """The viewer page for ``merged`` traces (``blooml.cli._traces.Merged``)."""
    data = json.dumps(merged.to_json(), separators=(",", ":"), default=repr)
    data = data.replace("</", "<\\/")  # keep the JSON inside its script element
    n_nodes, n_steps, n_msgs = len(merged.nodes), len(merged.steps), len(merged.arrows)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>{_CSS}</style></head>
<body>
<div id="diagram"><h1>{html.escape(title)}</h1>
<div class="legend">{n_nodes} nodes, {n_steps} ticks, {n_msgs} messages. Time flows down; a
circle is a tick, numbered (blue: it did something, grey: idle, red: error or rollback), an arrow a
message (dashed: a duplicate, red: never received). Click a tick.</div></div>
<div id="side"><div id="detail">Click a tick to see what it took in, derived, sent and
raised.</div></div>
<script type="application/json" id="trace-data">{data}</script>
<script>{_JS}</script>
</body></html>
"""
