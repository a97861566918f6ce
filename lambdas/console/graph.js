// The job page's workflow graph: the state machine's own states (GET …/graph), laid out top to bottom and drawn as
// SVG, each state coloured, marked and titled with this job's status.
//
// Layout, written here rather than taken from a graph library (dagre, elkjs): a workflow is a chain with short
// branches (inline or distributed Map, a review's loop), so longest-path layering over the forward transitions and
// one lane per branch draw it readably in about a hundred lines, with no build step and no 100 KB dependency.
// The main column holds the states on a way from the start to a Succeed state, a branch (the distributed Map, a
// review's wait) takes the next lane on its right; the states off that way (the failure path: record failure →
// dead letter → Fail, a stop) are drawn beside the state they leave, when this job entered them (or all of them
// with `showAll`). Back edges (the review's wait → advance → decided? loop) are routed round the right side.
//
// Steps first: by default the graph is folded (`fold`): every state a step owns (a Map's "inline or distributed?"
// Choice, its tallies and "any item failed?" checks, its "record failure" and "dead letter" Tasks, a review's wait
// loop, an agent's turn Choice) is drawn as the step's one node, with the step's status; the states that belong to no
// step (the start's Choice, "Job completed", "Job failed") stay as they are. `internal` draws the states themselves.
//
// Nothing is clipped: each box is as wide as its text, measured with the page's own font (a canvas's measureText),
// and each lane as wide as its widest box.

const SVG = 'http://www.w3.org/2000/svg';
export const STATUS_TEXT = {
  done: { icon: '✓', label: 'done' },
  running: { icon: '●', label: 'running' },
  waiting: { icon: '⏸', label: 'waiting (review, signal, pause)' },
  failed: { icon: '✕', label: 'failed' },
  stopped: { icon: '■', label: 'stopped' },
  skipped: { icon: '–', label: 'skipped' },
  pending: { icon: '○', label: 'not reached yet' },
};
const MIN_WIDTH = 120;
const GAP_X = 30;
const GAP_Y = 13;
const PAD = 14;
const SMALL = new Set(['Choice', 'Pass', 'Succeed', 'Fail', 'Wait']);

export function plural(unit, count) {
  if (count === 1) return unit;
  return /(s|x|ch|sh)$/.test(unit) ? `${unit}es` : `${unit}s`;
}

export function fanOutText(fanOut) {
  const total = fanOut.total === null || fanOut.total === undefined ? '?' : fanOut.total.toLocaleString('en-US');
  const failed = fanOut.failed ? `, ${fanOut.failed.toLocaleString('en-US')} failed` : '';
  const count = fanOut.total ?? fanOut.completed;
  return `${fanOut.completed.toLocaleString('en-US')} of ${total} ${plural(fanOut.unit, count)}${failed}`;
}

// ------------------------------------------------------------------------------------------------ steps first

// The state that does a step's own work: the step's name, or `<step> (…)` (`(one group)`, `(distributed)`), not a
// state named after one of those (`<step> (one item): record failure`).
function isWork(node) {
  return node.name === node.step || (node.name.startsWith(`${node.step} (`) && !node.name.includes(':'));
}

const PRIORITY = ['running', 'waiting', 'failed', 'stopped'];

/** The step's status from its states': what it is in now, how it ended, or (never run) skipped or pending. */
function stepStatus(members) {
  for (const status of PRIORITY) if (members.some((n) => n.status === status)) return status;
  const own = members.filter(isWork);
  const work = own.length ? own : members.filter((n) => !n.failure_path);
  if (work.some((n) => n.entered > 0)) return 'done';
  if (members.some((n) => n.entered > 0)) return 'skipped'; // only its routing ran: nothing to do (a review not asked)
  return (work[0] || members[0]).status === 'skipped' ? 'skipped' : 'pending';
}

/** The graph with each step's states folded into one node named after the step (see the module's comment). */
export function fold(graph) {
  const byName = new Map(graph.nodes.map((n) => [n.name, n]));
  const groupOf = (name) => byName.get(name)?.step || name;
  const members = new Map();
  for (const node of graph.nodes) {
    const key = groupOf(node.name);
    if (!members.has(key)) members.set(key, []);
    members.get(key).push(node);
  }
  const nodes = [...members].map(([name, states]) => {
    if (states.length === 1 && !states[0].step) return { ...states[0], states: [states[0].name] };
    const own = states.filter(isWork);
    const work = own.length ? own : states.filter((n) => !n.failure_path);
    return {
      name,
      type: states.some((n) => n.type === 'Map') ? 'Map' : (work[0] || states[0]).type,
      step: name,
      status: stepStatus(states),
      entered: work.reduce((sum, n) => sum + n.entered, 0),
      failure_path: states.every((n) => n.failure_path),
      waits_for_token: states.some((n) => n.waits_for_token),
      child_job_id: states.find((n) => n.child_job_id)?.child_job_id || null,
      states: states.map((n) => n.name),
    };
  });
  // A transition between two groups is one edge; a way into a Fail state or off a failure path counts as a catch
  // (drawn only when this job took it). Transitions inside a step disappear with its states.
  const edges = new Map();
  for (const edge of graph.edges) {
    const source = groupOf(edge.source);
    const target = groupOf(edge.target);
    if (source === target) continue;
    const failing = edge.kind === 'catch' || byName.get(edge.source)?.failure_path || byName.get(edge.target)?.type === 'Fail';
    const key = `${source}\u0000${target}`;
    const known = edges.get(key);
    const kind = failing ? 'catch' : edge.kind === 'catch' ? 'next' : edge.kind;
    if (!known) edges.set(key, { source, target, kind, taken: edge.taken });
    else {
      if (known.kind === 'catch' && kind !== 'catch') known.kind = kind;
      known.taken = known.taken || edge.taken;
    }
  }
  return { ...graph, start_at: groupOf(graph.start_at), nodes, edges: [...edges.values()] };
}

// ------------------------------------------------------------------------------------------------ text sizes

const FONT_SIZE = { label: 12, sub: 11 };
let measure = null;

/** The width in pixels of `text` drawn in the graph's font (the page's own, at the size of `kind`). */
export function textWidth(text, kind = 'label') {
  if (measure === null) {
    const context = typeof document === 'undefined' ? null : document.createElement('canvas').getContext('2d');
    const family = typeof document === 'undefined' ? '' : getComputedStyle(document.documentElement).fontFamily;
    measure = { context, family: family || 'sans-serif' };
  }
  if (!measure.context) return text.length * FONT_SIZE[kind] * 0.62;
  measure.context.font = `${FONT_SIZE[kind]}px ${measure.family}`;
  return measure.context.measureText(text).width;
}

const TEXT_X = 28; // the label starts right of the status icon
const TEXT_PAD = 16; // room after it (and for the font's rounding)
const CHOICE_SLANT = 10;

function boxWidth(node, fanOut) {
  let width = TEXT_X + textWidth(node.name) + TEXT_PAD;
  if (fanOut) width = Math.max(width, TEXT_X + textWidth(fanOutText(fanOut), 'sub') + TEXT_PAD, TEXT_X + 100 + 10);
  if (node.type === 'Choice') width += CHOICE_SLANT;
  if (node.child_job_id) width += textWidth('child job →', 'sub') + TEXT_PAD; // its link, right of the label
  return Math.max(MIN_WIDTH, Math.ceil(width));
}

function group(edges, key) {
  const map = new Map();
  for (const edge of edges) {
    if (!map.has(edge[key])) map.set(edge[key], []);
    map.get(edge[key]).push(edge);
  }
  return map;
}

function reach(start, by, toward) {
  const seen = new Set([start]);
  const todo = [start];
  while (todo.length) {
    for (const edge of by.get(todo.pop()) || []) {
      if (!seen.has(edge[toward])) {
        seen.add(edge[toward]);
        todo.push(edge[toward]);
      }
    }
  }
  return seen;
}

// A state that runs a fan-out's items: its Maps, and a grouped fan-out's Task for its only group.
const runsItems = (node) => node.step && (node.type === 'Map' || node.name === `${node.step} (one group)`);

// A fan-out's items are drawn on the state that ran them (or, before one ran, on each state that may).
function showsItems(node, graph) {
  if (!runsItems(node)) return false;
  const maps = graph.nodes.filter((n) => runsItems(n) && n.step === node.step);
  if (maps.some((n) => n.entered)) return node.entered > 0;
  const items = (graph.fan_outs || []).find((f) => f.step === node.step);
  return node.status === 'pending' && items?.total !== 0; // a fan-out over nothing is skipped, not run
}

function nodeHeight(node, fanOut) {
  if (fanOut) return 46;
  return SMALL.has(node.type) ? 24 : 30;
}

/** Positions of the drawn states and the edges between them. */
export function layout(graph, { showAll = false } = {}) {
  const byName = new Map(graph.nodes.map((n) => [n.name, n]));
  const fanOuts = new Map((graph.fan_outs || []).map((f) => [f.step, f]));
  const order = { next: 0, default: 0, choice: 1, catch: 2 };
  const normal = graph.edges.filter((e) => e.kind !== 'catch').sort((a, b) => order[a.kind] - order[b.kind]);
  const out = group(normal, 'source');

  // Back edges: those closing a loop in a depth-first walk from the start.
  const back = new Set();
  const mark = new Map();
  const visit = (name) => {
    mark.set(name, 1);
    for (const edge of out.get(name) || []) {
      const seen = mark.get(edge.target);
      if (seen === 1) back.add(edge);
      else if (!seen) visit(edge.target);
    }
    mark.set(name, 2);
  };
  visit(graph.start_at);
  const forward = normal.filter((e) => !back.has(e));
  const forwardOut = group(forward, 'source');

  const fromStart = reach(graph.start_at, forwardOut, 'target');
  const toSuccess = new Set(); // a loop's states too (a review's wait goes back to its Choice, which goes on)
  const normalIn = group(normal, 'target');
  for (const node of graph.nodes.filter((n) => n.type === 'Succeed')) {
    for (const name of reach(node.name, normalIn, 'source')) toSuccess.add(name);
  }
  let main = new Set([...fromStart].filter((n) => toSuccess.has(n)));
  if (!main.size) main = fromStart;

  // Topological order of the main states (Kahn), then longest-path ranks and one lane per branch.
  const indegree = new Map([...main].map((n) => [n, 0]));
  for (const edge of forward) if (main.has(edge.source) && main.has(edge.target)) indegree.set(edge.target, indegree.get(edge.target) + 1);
  const queue = [...main].filter((n) => indegree.get(n) === 0);
  const topo = [];
  while (queue.length) {
    const name = queue.shift();
    topo.push(name);
    for (const edge of forwardOut.get(name) || []) {
      if (!main.has(edge.target)) continue;
      indegree.set(edge.target, indegree.get(edge.target) - 1);
      if (indegree.get(edge.target) === 0) queue.push(edge.target);
    }
  }
  const rank = new Map();
  const lane = new Map();
  for (const name of topo) {
    if (!rank.has(name)) rank.set(name, 0);
    if (!lane.has(name)) lane.set(name, 0);
    let branch = 0;
    for (const edge of forwardOut.get(name) || []) {
      if (!main.has(edge.target)) continue;
      rank.set(edge.target, Math.max(rank.get(edge.target) ?? 0, rank.get(name) + 1));
      lane.set(edge.target, Math.min(lane.get(edge.target) ?? Infinity, lane.get(name) + branch));
      branch += 1;
    }
  }
  const occupied = new Set();
  for (const name of topo) {
    while (occupied.has(`${rank.get(name)}:${lane.get(name)}`)) lane.set(name, lane.get(name) + 1);
    occupied.add(`${rank.get(name)}:${lane.get(name)}`);
  }

  // The side lane: the other states this job entered (or every one, with showAll), below their predecessors.
  const visible = new Set(main);
  for (const node of graph.nodes) if (showAll || node.entered > 0) visible.add(node.name);
  const side = graph.nodes.map((n) => n.name).filter((n) => visible.has(n) && !main.has(n));
  const incoming = group(graph.edges, 'target');
  for (let pass = 0; pass < side.length + 1; pass += 1) {
    for (const name of side) {
      const before = (incoming.get(name) || []).filter((e) => rank.has(e.source) && visible.has(e.source));
      const wanted = before.length ? Math.max(...before.map((e) => rank.get(e.source))) + 1 : 0;
      if ((rank.get(name) ?? -1) < wanted) rank.set(name, wanted);
    }
  }
  // Each goes in the first free lane right of the main column at its rank (failure paths sit beside the step).
  for (const name of [...side].sort((a, b) => (rank.get(a) ?? 0) - (rank.get(b) ?? 0))) {
    const r = rank.get(name) ?? 0;
    let l = 1;
    while (occupied.has(`${r}:${l}`)) l += 1;
    occupied.add(`${r}:${l}`);
    lane.set(name, l);
  }

  // Coordinates: each rank as tall as its tallest state.
  const rows = Math.max(0, ...[...visible].map((n) => rank.get(n) ?? 0)) + 1;
  const rowHeight = new Array(rows).fill(0);
  for (const name of visible) {
    const node = byName.get(name);
    const r = rank.get(name) ?? 0;
    rowHeight[r] = Math.max(rowHeight[r], nodeHeight(node, showsItems(node, graph) && fanOuts.get(node.step)));
  }
  const rowTop = [];
  let y = PAD;
  for (let r = 0; r < rows; r += 1) {
    rowTop.push(y);
    y += rowHeight[r] + GAP_Y;
  }
  // Each lane as wide as its widest box (its text measured), the lanes side by side.
  const fanOutOf = (node) => (showsItems(node, graph) ? fanOuts.get(node.step) : undefined);
  const laneWidth = [];
  for (const name of visible) {
    const node = byName.get(name);
    const l = lane.get(name);
    laneWidth[l] = Math.max(laneWidth[l] ?? MIN_WIDTH, boxWidth(node, fanOutOf(node)));
  }
  const laneX = [];
  let x = PAD;
  for (let l = 0; l < laneWidth.length; l += 1) {
    laneX.push(x);
    x += (laneWidth[l] ?? 0) + (laneWidth[l] ? GAP_X : 0);
  }
  const boxes = new Map();
  for (const name of visible) {
    const node = byName.get(name);
    const r = rank.get(name) ?? 0;
    const fanOut = fanOutOf(node);
    const height = nodeHeight(node, fanOut);
    boxes.set(name, {
      node,
      x: laneX[lane.get(name)],
      y: rowTop[r] + (rowHeight[r] - height) / 2,
      width: laneWidth[lane.get(name)],
      height,
      fanOut,
      side: !main.has(name),
    });
  }
  const edges = graph.edges.filter(
    (e) => boxes.has(e.source) && boxes.has(e.target) && (e.kind !== 'catch' || e.taken),
  );
  const right = Math.max(0, ...[...boxes.values()].map((b) => b.x + b.width));
  return {
    boxes,
    edges,
    back,
    width: right + 4 + 30 + PAD, // a Map's second card, and the loops routed round the right side
    height: y + PAD,
  };
}

/** The order of the workflow's steps along the main path (for a replay's step list). */
export function stepOrder(graph) {
  const { boxes } = layout(graph);
  const first = new Map();
  for (const box of [...boxes.values()].filter((b) => !b.side).sort((a, b) => a.y - b.y || a.x - b.x)) {
    if (box.node.step && !first.has(box.node.step)) first.set(box.node.step, box.y);
  }
  return [...first.keys()];
}

function svg(tag, attrs = {}, ...children) {
  const el = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs)) if (value !== undefined && value !== null) el.setAttribute(key, String(value));
  for (const child of children) if (child !== null && child !== undefined) el.append(child);
  return el;
}

function shape(box) {
  const { width: w, height: hgt, node } = box;
  if (node.type === 'Choice') {
    const points = [[10, 0], [w - 10, 0], [w, hgt / 2], [w - 10, hgt], [10, hgt], [0, hgt / 2]];
    return [svg('polygon', { points: points.map((p) => p.join(',')).join(' '), class: 'outline' })];
  }
  const radius = SMALL.has(node.type) ? hgt / 2 : 6;
  const outline = svg('rect', { width: w, height: hgt, rx: radius, class: 'outline' });
  if (node.type !== 'Map') return [outline];
  // A Map runs its items: a second card behind it.
  return [svg('rect', { x: 4, y: 4, width: w, height: hgt, rx: radius }), outline];
}

function edgePath(from, to, backward) {
  const x1 = from.x + from.width / 2;
  const y1 = from.y + from.height;
  const x2 = to.x + to.width / 2;
  const y2 = to.y;
  if (backward || y2 <= from.y) {
    const xr1 = from.x + from.width;
    const xr2 = to.x + to.width;
    const out = Math.max(xr1, xr2) + 26;
    return `M ${xr1} ${from.y + from.height / 2} C ${out} ${from.y + from.height / 2}, ${out} ${to.y + to.height / 2}, ${xr2 + 6} ${to.y + to.height / 2}`;
  }
  const bend = Math.max(12, (y2 - y1) / 2);
  return `M ${x1} ${y1} C ${x1} ${y1 + bend}, ${x2} ${y2 - bend}, ${x2} ${y2}`;
}

/** The graph as an <svg> element: its steps (folded), or with `internal` the definition's states (`showAll`: also
 * the failure path this job did not take). */
export function renderGraph(graph, { internal = false, showAll = false } = {}) {
  const shown = internal ? graph : fold(graph);
  const placed = layout(shown, { showAll: internal && showAll });
  const title = `Workflow ${graph.workflow} of job ${graph.job_id}`;
  const passed = graph.nodes.filter((n) => n.entered > 0).map((n) => `${n.name} (${STATUS_TEXT[n.status].label})`);
  const root = svg(
    'svg',
    {
      xmlns: SVG,
      width: placed.width,
      height: placed.height,
      viewBox: `0 0 ${placed.width} ${placed.height}`,
      role: 'img',
      'aria-labelledby': 'graph-title graph-desc',
      'data-execution': graph.execution,
      'data-view': internal ? 'states' : 'steps',
    },
    svg('title', { id: 'graph-title' }, title),
    svg('desc', { id: 'graph-desc' }, passed.length ? `States this job passed through: ${passed.join(', ')}.` : 'The job has not started yet.'),
  );
  const defs = svg('defs');
  for (const kind of ['plain', 'taken']) {
    defs.append(
      svg(
        'marker',
        { id: `arrow-${kind}`, class: kind, viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse' },
        svg('path', { d: 'M 0 0 L 10 5 L 0 10 z' }),
      ),
    );
  }
  root.append(defs);
  const edgeLayer = svg('g', { class: 'edges' });
  for (const edge of placed.edges) {
    const from = placed.boxes.get(edge.source);
    const to = placed.boxes.get(edge.target);
    const backward = [...placed.back].some((b) => b.source === edge.source && b.target === edge.target);
    edgeLayer.append(
      svg('path', {
        d: edgePath(from, to, backward),
        class: `edge ${edge.kind}${edge.taken ? ' taken' : ''}`,
        'marker-end': `url(#arrow-${edge.taken ? 'taken' : 'plain'})`,
        'data-source': edge.source,
        'data-target': edge.target,
      }),
    );
  }
  root.append(edgeLayer);
  for (const box of placed.boxes.values()) {
    const { node } = box;
    const status = STATUS_TEXT[node.status] || STATUS_TEXT.pending;
    const times = node.entered > 1 ? `, entered ${node.entered} times` : '';
    const folded = node.states && node.states.length > 1 ? `; its states: ${node.states.join(', ')}` : '';
    const item = svg(
      'g',
      {
        class: `node ${node.status} type-${node.type}`,
        transform: `translate(${box.x}, ${box.y})`,
        'data-state': node.name,
        'data-status': node.status,
        'data-states': node.states ? node.states.join('\n') : null,
      },
      svg('title', {}, `${node.name} (${node.type}): ${status.label}${times}${folded}`),
      ...shape(box),
      svg('text', { x: 12, y: box.fanOut ? 19 : box.height / 2 + 4, class: 'icon', 'aria-hidden': 'true' }, status.icon),
      svg('text', { x: TEXT_X, y: box.fanOut ? 19 : box.height / 2 + 4, class: 'label' }, node.name),
    );
    if (box.fanOut) {
      const fanOut = box.fanOut;
      const track = box.width - 38;
      const done = fanOut.total ? Math.min(1, fanOut.completed / fanOut.total) : 0;
      const failed = fanOut.total ? Math.min(1 - done, fanOut.failed / fanOut.total) : 0;
      item.append(
        svg('text', { x: TEXT_X, y: 33, class: 'sub' }, fanOutText(fanOut)),
        svg('rect', { x: 28, y: 37, width: track, height: 5, rx: 2, class: 'bar-track' }),
        svg('rect', { x: 28, y: 37, width: track * done, height: 5, rx: 2, class: 'bar-fill' }),
        svg('rect', { x: 28 + track * done, y: 37, width: track * failed, height: 5, class: 'bar-failed' }),
      );
    }
    if (node.child_job_id) { // a child step: a link to the job it started, under its label
      item.append(svg('a', { href: `jobs/${encodeURIComponent(node.child_job_id)}`, 'data-nav': true, class: 'child-link' },
        svg('title', {}, `child job ${node.child_job_id}`),
        svg('text', { x: box.width - 8, y: box.height / 2 + 4, class: 'sub', 'text-anchor': 'end' }, 'child job →')));
    }
    root.append(item);
  }
  return root;
}
