// The job page's trace: "where the time went" (the job view's `timing`) as one stacked bar, and the job's spans
// (GET …/trace: `{trace_id, spans: [{span_id, parent_id, name, start, end, status, attributes}]}`) as a waterfall.
//
// The waterfall is HTML, not SVG: one row per span in a three-column grid (its name indented by its depth, its
// duration, its bar on a time axis shared by every row). A bar's place and length are percentages of its track, so
// every bar lies within the axis whatever the window's width; a name wraps instead of being cut. Rows are in tree
// order (a span, then its children by start time); a span whose parent is not in the trace is drawn at the top level
// and says so. A click on a span's name opens its attributes below its row (text, never HTML); hovering it shows them
// as a tooltip. Model calls (a `gen_ai.operation.name` attribute), retries (an `attempt` above 1, or the same span
// again after one that failed) and failures (status ERROR) are marked in words as well as colour.
//
// Large traces stay readable: of a fan-out's items (more than FAN_OUT_SHOWN spans of one name under one parent) the
// first FAN_OUT_SHOWN are drawn, and every one that failed or was retried; a row says how many more there are and
// shows them on request.

export const FAN_OUT_SHOWN = 5;
// The job view's `timing`, in the order a job spends it, with the words the page says.
export const TIMING_PARTS = [
  { key: 'queue_wait_seconds', label: 'Queue wait', part: 'queue' },
  { key: 'executing_seconds', label: 'Executing', part: 'executing' },
  { key: 'backoff_seconds', label: 'Backoff and retries', part: 'backoff' },
  { key: 'review_wait_seconds', label: 'Waiting for review', part: 'review' },
  { key: 'provider_wait_seconds', label: 'Waiting on a provider', part: 'provider' },
];
// What a GenAI span's operation is, in words (the conventions' `gen_ai.operation.name` values).
const OPERATIONS = {
  chat: 'model call',
  text_completion: 'model call',
  generate_content: 'model call',
  embeddings: 'embeddings',
  invoke_agent: 'agent turn',
  create_agent: 'agent',
  execute_tool: 'tool call',
};
const GEN_AI_OPERATION = 'gen_ai.operation.name';
const GEN_AI_MODEL = ['gen_ai.request.model', 'gen_ai.response.model'];
const GEN_AI_TOKENS = [
  ['gen_ai.usage.input_tokens', 'in'],
  ['gen_ai.usage.output_tokens', 'out'],
  ['gen_ai.usage.cache_read.input_tokens', 'cache read'],
  ['gen_ai.usage.cache_creation.input_tokens', 'cache write'],
];
const TICKS = 4; // the axis is cut in quarters
const MAX_INDENT = 12; // deeper spans are indented no further (and say their depth)

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === 'class') el.className = value;
    else if (key === 'style') el.style.cssText = value;
    else if (key.startsWith('on')) el.addEventListener(key.slice(2), value);
    else el.setAttribute(key, value === true ? '' : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child !== null && child !== undefined && child !== false) el.append(child instanceof Node ? child : String(child));
  }
  return el;
}

/** Seconds in words a person reads at a glance: `340 ms`, `4.25 s`, `2 min 05 s`, `1 h 02 min`. */
export function seconds(value) {
  const s = Math.max(0, Number(value) || 0);
  if (s === 0) return '0 s';
  if (s < 0.001) return '<1 ms';
  if (s < 1) return `${Math.round(s * 1000)} ms`;
  if (s < 10) return `${s.toFixed(2)} s`;
  if (s < 60) return `${s.toFixed(1)} s`;
  const whole = Math.round(s);
  if (whole < 3600) return `${Math.floor(whole / 60)} min ${String(whole % 60).padStart(2, '0')} s`;
  return `${Math.floor(whole / 3600)} h ${String(Math.floor((whole % 3600) / 60)).padStart(2, '0')} min`;
}

function share(part, whole) {
  if (!whole) return '0%';
  const percent = (part / whole) * 100;
  if (percent > 0 && percent < 1) return '<1%';
  return `${Math.round(percent)}%`;
}

// ------------------------------------------------------------------------------------------------ where the time went

/** The job's wall time split as `timing` says, or null when the job view has no `timing`. */
export function renderTiming(timing) {
  if (!timing || typeof timing !== 'object') return null;
  const parts = TIMING_PARTS.map((p) => ({ ...p, value: Math.max(0, Number(timing[p.key]) || 0) }));
  const sum = parts.reduce((n, p) => n + p.value, 0);
  const total = Number(timing.total_seconds) > 0 ? Number(timing.total_seconds) : sum;
  // Time the split does not name (between steps, in the engine) is shown as such rather than stretched over the rest.
  const rest = total - sum;
  if (rest > total * 0.005) parts.push({ key: null, label: 'Not attributed', part: 'other', value: rest });
  const scale = Math.max(total, sum);
  const said = parts.map((p) => `${p.label} ${seconds(p.value)} (${share(p.value, total)})`).join(', ');
  const bar = h('div', { class: 'timing-bar', role: 'img', 'aria-label': `Where the time went: ${said}` },
    parts.filter((p) => p.value > 0).map((p) => h('div', {
      class: `timing-part ${p.part}`,
      'data-part': p.part,
      style: `width: ${((p.value / scale) * 100).toFixed(4)}%`,
      title: `${p.label}: ${seconds(p.value)} (${share(p.value, total)})`,
    })));
  const legend = h('ul', { class: 'timing-legend', 'aria-label': 'The job’s time, by what it waited on' },
    parts.map((p) => h('li', { 'data-part': p.part },
      h('span', { class: `timing-swatch ${p.part}`, 'aria-hidden': 'true' }),
      h('span', { class: 'timing-label' }, p.label),
      h('strong', { class: 'timing-seconds' }, seconds(p.value)),
      h('span', { class: 'timing-share' }, share(p.value, total)))));
  return h('div', { class: 'timing', id: 'timing' },
    h('p', { class: 'timing-total' }, 'Total ', h('strong', {}, seconds(total)),
      sum === 0 ? ' — nothing measured yet.' : ''),
    sum === 0 ? '' : bar,
    legend);
}

// ------------------------------------------------------------------------------------------------ the waterfall

const time = (iso) => (iso ? Date.parse(iso) : NaN);

/** A span's status as OTel names it: ERROR, OK or UNSET (from a string or `{status_code|code, description}`). */
export function statusOf(span) {
  const raw = span.status && typeof span.status === 'object' ? span.status.status_code ?? span.status.code : span.status;
  const text = String(raw ?? 'UNSET').toUpperCase();
  if (text.includes('ERROR')) return 'ERROR';
  if (text.includes('OK')) return 'OK';
  return 'UNSET';
}

// An attribute named `<key>` or `….<key>` (`longhaul.attempt`, `longhaul.item`): the spans' own names may move.
function attributeOf(attributes, key) {
  for (const [name, value] of Object.entries(attributes || {})) {
    if (name === key || name.endsWith(`.${key}`)) return value;
  }
  return null;
}

function attemptOf(attributes) {
  const value = attributeOf(attributes, 'attempt');
  return value !== null && Number.isFinite(Number(value)) ? Number(value) : null;
}

// The key of one piece of work tried again: the same name for the same item, under the same parent.
const workOf = (span) => `${span.name}\u0000${valueOrNone(attributeOf(span.attributes, 'item'))}`;
const valueOrNone = (value) => (value === null || value === undefined ? '' : String(value));

// The key two spans of one fan-out share: their parent and their name without numbers (`item 3`, `item 4`).
const familyOf = (span) => `${span.parent_id ?? ''} › ${String(span.name).replace(/\d+/g, '#')}`;

/** The spans as a tree in reading order: each with its depth, children, and the marks the waterfall draws. */
export function arrange(trace) {
  const spans = (trace?.spans || []).map((span) => ({
    ...span,
    attributes: span.attributes || {},
    startMs: time(span.start),
    endMs: time(span.end),
    statusDescription: span.status && typeof span.status === 'object' ? span.status.description ?? null : null,
    children: [],
    orphan: false,
  }));
  const byId = new Map(spans.map((s) => [s.span_id, s]));
  const roots = [];
  for (const span of spans) {
    const parent = span.parent_id !== null && span.parent_id !== undefined ? byId.get(span.parent_id) : null;
    if (parent && parent !== span) parent.children.push(span);
    else {
      span.orphan = Boolean(span.parent_id);
      roots.push(span);
    }
  }
  const byStart = (a, b) => (a.startMs - b.startMs) || (a.endMs - b.endMs) || String(a.name).localeCompare(String(b.name));
  const known = spans.flatMap((s) => [s.startMs, s.endMs]).filter(Number.isFinite);
  const axis = { // (a reduce, not Math.min(...known): a trace of many thousand spans would overflow the arguments)
    start: known.length ? known.reduce((a, b) => Math.min(a, b)) : 0,
    end: known.length ? known.reduce((a, b) => Math.max(a, b)) : 1,
  };
  if (axis.end <= axis.start) axis.end = axis.start + 1;
  const ordered = [];
  const seen = new Set();
  const walk = (span, depth) => {
    if (seen.has(span.span_id)) return; // a cycle in a broken trace is drawn once
    seen.add(span.span_id);
    span.depth = depth;
    span.status = statusOf(span);
    span.open = !Number.isFinite(span.endMs);
    span.attempt = attemptOf(span.attributes);
    span.operation = span.attributes[GEN_AI_OPERATION] ?? null;
    ordered.push(span);
    span.children.sort(byStart);
    const failedBefore = new Set();
    for (const child of span.children) {
      child.family = familyOf(child);
      child.retry = (attemptOf(child.attributes) ?? 1) > 1 || failedBefore.has(workOf(child));
      if (statusOf(child) === 'ERROR') failedBefore.add(workOf(child));
      walk(child, depth + 1);
    }
  };
  roots.sort(byStart);
  const failedRoots = new Set();
  for (const root of roots) {
    root.family = familyOf(root);
    root.retry = (attemptOf(root.attributes) ?? 1) > 1 || failedRoots.has(workOf(root));
    if (statusOf(root) === 'ERROR') failedRoots.add(workOf(root));
    walk(root, 0);
  }
  for (const span of spans) if (!seen.has(span.span_id)) walk(span, 0); // parents in a cycle: still shown
  return { spans: ordered, axis };
}

// Which spans a fan-out's collapse hides: beyond the first FAN_OUT_SHOWN of a family (more than FAN_OUT_SHOWN + 1 of
// them), those that neither failed nor were retried, nor hold such a span; their descendants go with them.
function hiddenSpans(spans, showAll) {
  const hidden = new Set();
  const families = new Map();
  for (const span of spans) {
    if (!families.has(span.family)) families.set(span.family, []);
    families.get(span.family).push(span);
  }
  const notable = new Set();
  for (const span of [...spans].reverse()) {
    if (span.status === 'ERROR' || span.retry || span.children.some((c) => notable.has(c.span_id))) notable.add(span.span_id);
  }
  const folds = new Map(); // the last span drawn of a folded family → [family, how many hidden, how many in all]
  for (const [family, members] of families) {
    if (members.length <= FAN_OUT_SHOWN + 1) continue;
    const folded = members.slice(FAN_OUT_SHOWN).filter((s) => !notable.has(s.span_id));
    if (folded.length < 2) continue;
    const foldedIds = new Set(folded.map((s) => s.span_id));
    const drawn = members.filter((s) => !foldedIds.has(s.span_id));
    if (!showAll.has(family)) for (const span of folded) hidden.add(span.span_id);
    folds.set(showAll.has(family) ? members[members.length - 1].span_id : drawn[drawn.length - 1].span_id,
      { family, folded: folded.length, total: members.length, name: members[0].name });
  }
  const out = new Set();
  for (const span of spans) {
    if (hidden.has(span.span_id) || (span.parent_id && out.has(span.parent_id))) out.add(span.span_id);
  }
  return { out, folds };
}

function tags(span) {
  const list = [];
  if (span.operation) {
    list.push(h('span', { class: 'tag genai', title: `${GEN_AI_OPERATION}: ${span.operation}` },
      '✦ ', OPERATIONS[span.operation] || String(span.operation).replaceAll('_', ' ')));
  }
  if (span.retry) list.push(h('span', { class: 'tag retry' }, '↻ retry', span.attempt ? ` · attempt ${span.attempt}` : ''));
  else if (span.attempt && span.status === 'ERROR') list.push(h('span', { class: 'tag attempt' }, `attempt ${span.attempt}`));
  if (span.status === 'ERROR') {
    const type = span.attributes['error.type'] ?? span.statusDescription;
    list.push(h('span', { class: 'tag error' }, '✕ error', type ? `: ${type}` : ''));
  }
  if (span.open) list.push(h('span', { class: 'tag open' }, 'not ended'));
  if (span.orphan) list.push(h('span', { class: 'tag orphan', title: `parent ${span.parent_id}` }, 'parent not in the trace'));
  return list;
}

function modelLine(span) {
  if (!span.operation) return null;
  const attrs = span.attributes;
  const named = GEN_AI_MODEL.map((k) => attrs[k]).find((v) => v !== undefined && v !== null);
  const model = named !== undefined && !String(span.name).includes(String(named)) ? named : null; // said once
  const tokens = GEN_AI_TOKENS.filter(([k]) => attrs[k] !== undefined && attrs[k] !== null)
    .map(([k, words]) => `${Number(attrs[k]).toLocaleString('en-US')} ${words}`);
  const text = [model, tokens.length ? `${tokens.join(', ')} tokens` : null].filter(Boolean).join(' · ');
  return text ? h('span', { class: 'span-sub' }, text) : null;
}

const valueText = (value) => (typeof value === 'object' && value !== null ? JSON.stringify(value) : String(value));

function attributeTable(span) {
  const entries = Object.entries(span.attributes).sort(([a], [b]) => a.localeCompare(b));
  const facts = [
    ['span_id', span.span_id],
    ['parent_id', span.parent_id ?? '—'],
    ['start', span.start ?? '—'],
    ['end', span.end ?? '—'],
    ['status', span.status],
  ];
  return h('table', { class: 'span-attr-table' },
    h('caption', { class: 'visually-hidden' }, `Attributes of ${span.name}`),
    h('tbody', {},
      facts.map(([k, v]) => h('tr', { class: 'span-fact' }, h('th', { scope: 'row' }, k), h('td', { class: 'mono' }, String(v)))),
      entries.length
        ? entries.map(([k, v]) => h('tr', { 'data-attribute': k }, h('th', { scope: 'row', class: 'mono' }, k), h('td', {}, valueText(v))))
        : h('tr', {}, h('td', { colspan: 2, class: 'hint' }, 'No attributes.'))));
}

function tooltip(span) {
  const lines = Object.entries(span.attributes).sort(([a], [b]) => a.localeCompare(b)).map(([k, v]) => `${k}: ${valueText(v)}`);
  return [`${span.name} — ${span.status}`, ...lines].join('\n');
}

function axisHead(axis) {
  const length = (axis.end - axis.start) / 1000;
  const ticks = [];
  for (let i = 0; i <= TICKS; i += 1) {
    const edge = i === 0 ? 'first' : i === TICKS ? 'last' : null;
    ticks.push(h('span', { class: `tick ${edge || ''}`, style: `left: ${(i / TICKS) * 100}%` }, seconds((length * i) / TICKS)));
  }
  return h('div', { class: 'span-row span-head', 'aria-hidden': 'true' },
    h('div', { class: 'span-label' }, 'Span'),
    h('div', { class: 'span-dur' }, 'Duration'),
    h('div', { class: 'span-track axis' }, ticks));
}

/**
 * The waterfall of `trace`. `view` keeps what the reader opened across redraws: `open` (span ids whose attributes are
 * shown) and `showAll` (fan-out families drawn in full); `redraw` is called after a change to it.
 */
export function renderWaterfall(trace, view, redraw) {
  const { spans, axis } = arrange(trace);
  if (!spans.length) return h('p', { class: 'hint', id: 'waterfall-empty' }, 'No spans recorded for this job yet.');
  const { out, folds } = hiddenSpans(spans, view.showAll);
  const range = axis.end - axis.start;
  const pending = []; // "show all" rows, each drawn after the last row of its family's last span
  const flush = (depth) => {
    while (pending.length && pending[pending.length - 1].depth >= depth) list.append(pending.pop().row);
  };
  const list = h('ol', { class: 'waterfall', 'aria-label': `Spans of trace ${trace.trace_id ?? ''}`, 'data-trace': trace.trace_id ?? '' });
  for (const span of spans) {
    if (out.has(span.span_id)) continue;
    flush(span.depth);
    const startMs = Number.isFinite(span.startMs) ? span.startMs : axis.start;
    const endMs = span.open ? axis.end : Math.max(startMs, span.endMs);
    const left = ((startMs - axis.start) / range) * 100;
    const width = ((endMs - startMs) / range) * 100;
    const lasted = (endMs - startMs) / 1000;
    const opened = view.open.has(span.span_id);
    const attrsId = `span-attrs-${span.span_id}`;
    const classes = ['span-row', span.status === 'ERROR' ? 'error' : '', span.operation ? 'genai' : '', span.retry ? 'retry' : '',
      span.open ? 'open' : ''].filter(Boolean).join(' ');
    const name = h('button', {
      type: 'button', class: 'span-name', 'aria-expanded': opened ? 'true' : 'false', 'aria-controls': attrsId,
      title: tooltip(span),
    }, span.name);
    name.addEventListener('click', () => {
      if (view.open.has(span.span_id)) view.open.delete(span.span_id);
      else view.open.add(span.span_id);
      redraw({ span: span.span_id });
    });
    const indent = Math.min(span.depth, MAX_INDENT);
    list.append(h('li', {
      class: classes, 'data-span-id': span.span_id, 'data-depth': span.depth, 'data-status': span.status,
      style: `--depth: ${indent}`,
    },
    h('div', { class: 'span-label' },
      span.depth > MAX_INDENT ? h('span', { class: 'span-deep' }, `${span.depth}›`) : '',
      name, h('span', { class: 'span-tags' }, tags(span)), modelLine(span)),
    h('div', { class: 'span-dur' }, span.open ? `${seconds(lasted)}+` : seconds(lasted),
      h('span', { class: 'visually-hidden' }, `, from +${seconds((startMs - axis.start) / 1000)}`)),
    h('div', { class: 'span-track' }, h('div', {
      class: 'span-bar',
      'aria-hidden': 'true',
      style: `left: min(${left.toFixed(4)}%, calc(100% - 2px)); width: max(${width.toFixed(4)}%, 2px)`,
      title: `${span.name}: from +${seconds((startMs - axis.start) / 1000)}, ${seconds(lasted)}`,
    })),
    h('div', { class: 'span-attrs', id: attrsId, hidden: !opened }, opened ? attributeTable(span) : '')));
    const fold = folds.get(span.span_id);
    if (fold) {
      const all = view.showAll.has(fold.family);
      const toggle = h('button', { type: 'button', class: 'link show-all', 'data-family': fold.family },
        all ? `Show the first ${FAN_OUT_SHOWN} only` : `Show all ${fold.total}`);
      toggle.addEventListener('click', () => {
        if (all) view.showAll.delete(fold.family);
        else view.showAll.add(fold.family);
        redraw({ family: fold.family });
      });
      pending.push({ depth: span.depth, row: h('li', { class: 'span-row span-fold', style: `--depth: ${indent}` },
        h('div', { class: 'span-label' },
          all ? `All ${fold.total} like “${fold.name}” shown. `
            : `${fold.folded} more like “${fold.name}” not shown (${fold.total} in all). `,
          toggle)) });
    }
  }
  flush(0);
  const count = spans.length - out.size;
  return h('div', { class: 'waterfall-box' },
    h('ul', { class: 'legend', 'aria-label': 'Waterfall legend' },
      h('li', {}, h('span', { class: 'swatch-bar plain', 'aria-hidden': 'true' }), 'span'),
      h('li', {}, h('span', { class: 'swatch-bar genai', 'aria-hidden': 'true' }), '✦ model call, agent turn or tool call'),
      h('li', {}, h('span', { class: 'swatch-bar retry', 'aria-hidden': 'true' }), '↻ retry'),
      h('li', {}, h('span', { class: 'swatch-bar error', 'aria-hidden': 'true' }), '✕ error')),
    h('p', { class: 'hint', id: 'waterfall-summary' },
      `${spans.length.toLocaleString('en-US')} spans over ${seconds(range / 1000)}`,
      count < spans.length ? `, ${count.toLocaleString('en-US')} shown` : '',
      '. Select a span’s name for its attributes.'),
    h('div', { class: 'waterfall-frame' }, axisHead(axis), list));
}
