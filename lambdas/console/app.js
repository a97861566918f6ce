// The Longhaul console: one page, routed by its path under /console/, calling the same JSON API as every client
// with the API key the person signs in with. The key is kept in sessionStorage (this browser tab, until it closes)
// and sent only to this page's own origin. What a key's role may not do is not offered: tenants see their jobs,
// reviewers their tenant's reviews, operators every tenant's jobs, dead letters, webhooks and policies.
// A job page follows its job through the events long-poll (GET …/events?cursor=&wait=20), streams the text its model
// calls write (GET …/stream, Server-Sent Events read through fetch: an EventSource cannot send the key), shows a
// provisional result before the final one, what the job waits on, and steers it (pause, resume, update). A route this
// API does not offer (404/405 on it) leaves its part out quietly. Under the workflow, the job's trace: where its time
// went (the job view's `timing`) and its spans as a waterfall (GET …/trace), read again at most every few seconds.

import { STATUS_TEXT, fanOutText, fold, plural, renderGraph, stepOrder } from './graph.js';
import { renderTiming, renderWaterfall } from './trace.js';

const BASE = new URL(document.baseURI);
const API_ROOT = new URL('../', BASE);
const STORE = 'longhaul.console.session';
const TERMINAL = new Set(['completed', 'failed', 'cancelled', 'expired']);
const REPLAYABLE = new Set(['failed', 'cancelled', 'expired']);
const JOB_STATUSES = [
  'queued', 'running', 'retrying', 'waiting_for_review', 'paused', 'completed', 'failed', 'cancel_requested',
  'cancelled', 'expired',
];
// What a job waits on (its view's `waiting.reason`), in words.
const WAIT_REASONS = {
  rate_limited: 'Rate-limited by the model provider',
  retry_scheduled: 'A retry is scheduled',
  provider_unavailable: 'The model provider is unavailable',
  external_system: 'Waiting on an external system',
  review: 'Waiting for review',
  signal: 'Waiting for a signal',
  paused: 'Paused',
  child: 'Waiting for a child job',
};
const ETA_BASIS = {
  history: 'from past jobs of this workflow',
  current_step: 'from the current step (no history yet)',
};
const STEER_ROUTE_MISSING = new Set([404, 405]); // the job exists (its page loaded): the route does not
const LONG_POLL_SECONDS = 20;
const TRACE_EVERY_MS = 5000; // a live job's trace is read again at most this often (it grows with every step)
// The manual's pages that explain what the console shows (the built manual's paths, under the address the page's
// `longhaul-manual` meta names: `LONGHAUL_MANUAL_URL`; without one no link is shown).
const MANUAL = document.querySelector('meta[name="longhaul-manual"]')?.content || '';
const MANUAL_PAGES = {
  status: 'concepts/jobs.html',
  steps: 'concepts/steps.html',
  fanOut: 'concepts/fan-out.html',
  validation: 'concepts/validation.html',
  cost: 'concepts/budgets.html',
  review: 'concepts/review.html',
  reviewing: 'how-to/review-a-job.html',
  completing: 'how-to/complete-a-job-by-hand.html',
  webhooks: 'concepts/webhooks.html',
  events: 'reference/events.html',
  errors: 'reference/faults.html',
  replay: 'how-to/replay-a-failure.html',
  trace: 'how-to/read-a-jobs-trace.html',
  policies: 'how-to/raise-tenant-limits.html',
  deadLetters: 'operating/runbooks.html',
};
const RUNGS = ['waiting', 'reminded', 'reassigned', 'final action taken'];

// ------------------------------------------------------------------------------------------------ small helpers

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === 'class') el.className = value;
    else if (key.startsWith('on')) el.addEventListener(key.slice(2), value);
    else el.setAttribute(key, value === true ? '' : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child !== null && child !== undefined && child !== false) el.append(child instanceof Node ? child : String(child));
  }
  return el;
}

const enc = encodeURIComponent;
const int = (n) => Number(n ?? 0).toLocaleString('en-US');
const usd = (s) => (s === null || s === undefined ? '—' : `$${s}`);
const when = (iso) => (iso ? new Date(iso).toLocaleString() : '—');
const clock = (iso) => new Date(iso).toLocaleTimeString([], { hour12: false });

function qs(params) {
  const search = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) if (value !== '' && value !== null && value !== undefined) search.set(key, value);
  const text = search.toString();
  return text ? `?${text}` : '';
}

function age(iso) {
  const seconds = Math.max(0, (Date.now() - Date.parse(iso)) / 1000);
  if (seconds < 60) return `${Math.round(seconds)} s`;
  if (seconds < 3600) return `${Math.round(seconds / 60)} min`;
  if (seconds < 86400) return `${Math.round(seconds / 3600)} h`;
  return `${Math.round(seconds / 86400)} d`;
}

function timeLeft(iso) {
  const seconds = (Date.parse(iso) - Date.now()) / 1000;
  return seconds <= 0 ? 'overdue' : `${age(new Date(Date.now() - seconds * 1000).toISOString())} left`;
}

function duration(seconds) {
  const s = Math.max(0, Math.ceil(seconds));
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${String(s % 60).padStart(2, '0')} s`;
  return `${Math.floor(s / 3600)} h ${String(Math.floor((s % 3600) / 60)).padStart(2, '0')} min`;
}

function untilText(iso) {
  const seconds = (Date.parse(iso) - Date.now()) / 1000;
  return seconds <= 0 ? 'due now' : `in ${duration(seconds)}`;
}

/** A time still to come, counted down each second (see `tickCountdowns`). */
function countdown(iso) {
  return h('span', { class: 'countdown', 'data-until': iso, title: when(iso) }, untilText(iso));
}

function tickCountdowns() {
  for (const el of document.querySelectorAll('.countdown[data-until]')) el.textContent = untilText(el.dataset.until);
}
setInterval(tickCountdowns, 1000);

function sleep(ms, signal) {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener('abort', () => { clearTimeout(timer); resolve(); }, { once: true });
  });
}

function badge(status, text) {
  return h('span', { class: `badge ${status}` }, text || String(status).replaceAll('_', ' '));
}

function announce(text) {
  document.getElementById('announce').textContent = text;
}

function progressOf(progress) {
  if (!progress) return '';
  const text = progress.message || (progress.total ? `${int(progress.completed)} of ${int(progress.total)} ${progress.unit}` : '');
  if (!progress.total) return h('span', { class: 'progress-text' }, text);
  return [
    h('progress', { value: progress.completed, max: progress.total, 'aria-label': text }),
    h('span', { class: 'progress-text' }, text),
  ];
}

// A "?" link to the manual's page on `topic` (a key of MANUAL_PAGES), opened beside the console; null without a manual.
function manualLink(topic, label) {
  if (!MANUAL || !MANUAL_PAGES[topic]) return null;
  const href = new URL(MANUAL_PAGES[topic], new URL(MANUAL.endsWith('/') ? MANUAL : `${MANUAL}/`, document.baseURI));
  return h('a', { class: 'manual', href: href.href, target: '_blank', rel: 'noopener', title: `Manual: ${label}` },
    '?', h('span', { class: 'visually-hidden' }, ` Manual: ${label}`));
}

function section(title, id, topic) {
  return h('section', { class: 'panel', 'aria-labelledby': id }, h('h2', { id }, title, topic ? manualLink(topic, title) : null));
}

function jobLink(jobId) {
  return h('a', { href: `jobs/${enc(jobId)}`, 'data-nav': true, class: 'mono' }, jobId);
}

function facts(pairs, { row = false } = {}) {
  const shown = pairs.filter(Boolean);
  if (row) return h('dl', { class: 'facts-row' }, shown.map(([term, value]) => h('div', {}, h('dt', {}, term), h('dd', {}, value))));
  return h('dl', { class: 'facts' }, shown.map(([term, value]) => [h('dt', {}, term), h('dd', {}, value)]));
}

// ------------------------------------------------------------------------------------------------ session and API

const session = {
  get() {
    try {
      return JSON.parse(sessionStorage.getItem(STORE)) || null;
    } catch {
      return null;
    }
  },
  set(value) { sessionStorage.setItem(STORE, JSON.stringify(value)); },
  clear() { sessionStorage.removeItem(STORE); },
};

class Problem extends Error {
  constructor(status, body) {
    super((body && (body.detail || body.title)) || `the API answered ${status}`);
    this.status = status;
    this.body = body || {};
  }
}

/** Call the API at `path` (relative to its root, e.g. `v1/jobs`); a problem answer throws `Problem`. */
async function api(path, { method = 'GET', body, signal, key, headers: extra = {} } = {}) {
  const headers = { Accept: 'application/json', Authorization: `Bearer ${key ?? session.get()?.key ?? ''}`, ...extra };
  const init = { method, headers, signal, cache: 'no-store', credentials: 'omit' };
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(new URL(path, API_ROOT), init);
  } catch (error) {
    if (error.name === 'AbortError') throw error;
    throw new Problem(0, { title: 'Network error', detail: 'The API could not be reached; try again.' });
  }
  const text = await response.text();
  let data = null;
  if (text) {
    try {
      data = JSON.parse(text);
    } catch {
      data = { detail: text };
    }
  }
  if (response.status === 401 && key === undefined) {
    session.clear();
    setTimeout(() => render('Your key is no longer accepted; sign in again.'));
  }
  if (!response.ok) throw new Problem(response.status, data);
  return data;
}

function problemBox(error) {
  if (error.name === 'AbortError') return '';
  const title = error.body?.title && error.body.title !== error.message ? `${error.body.title}: ` : '';
  return h('div', { class: 'alert', role: 'alert' }, title, error.message);
}

/** A 422's field errors next to their fields (`fields`: the last part of `loc` → the input); the rest in `general`. */
function showFieldErrors(error, fields, general) {
  for (const input of Object.values(fields)) clearFieldError(input);
  const rest = [];
  for (const item of error.body?.errors || []) {
    const loc = (item.loc || []).map(String);
    const name = loc.findLast((part) => Object.hasOwn(fields, part)); // the innermost (`budget.max_tokens`)
    if (name) setFieldError(fields[name], item.msg);
    else rest.push(`${loc.join('.')}: ${item.msg}`);
  }
  general.textContent = rest.length || !(error.body?.errors || []).length
    ? [error.message, ...rest].join(' — ')
    : 'Not saved: see the fields marked below.';
  const invalid = Object.values(fields).find((input) => input.getAttribute('aria-invalid') === 'true');
  (invalid || general).focus?.();
}

function setFieldError(input, message) {
  let note = document.getElementById(`${input.id}-error`);
  if (!note) {
    note = h('p', { class: 'field-error', id: `${input.id}-error` });
    input.after(note);
  }
  note.textContent = note.textContent ? `${note.textContent}; ${message}` : message;
  input.setAttribute('aria-invalid', 'true');
  input.setAttribute('aria-describedby', note.id);
}

function clearFieldError(input) {
  document.getElementById(`${input.id}-error`)?.remove();
  input.removeAttribute('aria-invalid');
  input.removeAttribute('aria-describedby');
}

// ------------------------------------------------------------------------------------------------ routing

const NAV = {
  tenant: [['jobs', 'Jobs'], ['triggers', 'Schedules & triggers']],
  reviewer: [['reviews', 'Reviews']],
  pii_reviewer: [['reviews', 'Reviews']],
  operator: [['jobs', 'Jobs'], ['ops/dead-letters', 'Dead letters'], ['ops/webhooks', 'Webhooks'], ['ops/policies', 'Tenant policies'], ['ops/reports', 'Reports']],
};
const ROUTES = [
  { path: /^$/, page: home },
  { path: /^jobs$/, page: jobsPage, roles: ['tenant', 'operator'], nav: 'jobs' },
  { path: /^jobs\/([^/]+)$/, page: jobPage, roles: ['tenant', 'operator'], nav: 'jobs' },
  { path: /^triggers$/, page: triggersPage, roles: ['tenant'], nav: 'triggers' },
  { path: /^reviews$/, page: reviewsPage, roles: ['reviewer', 'pii_reviewer'], nav: 'reviews' },
  { path: /^reviews\/([^/]+)$/, page: reviewPage, roles: ['reviewer', 'pii_reviewer'], nav: 'reviews' },
  { path: /^ops$/, page: () => go('ops/dead-letters', { replace: true }), roles: ['operator'] },
  { path: /^ops\/dead-letters$/, page: deadLettersPage, roles: ['operator'], nav: 'ops/dead-letters' },
  { path: /^ops\/webhooks$/, page: webhooksPage, roles: ['operator'], nav: 'ops/webhooks' },
  { path: /^ops\/policies$/, page: policiesPage, roles: ['operator'], nav: 'ops/policies' },
  { path: /^ops\/reports$/, page: reportsPage, roles: ['operator'], nav: 'ops/reports' },
];
let shown = null; // the page on screen: aborted when another is shown (its requests and long-polls stop)

function pagePath() {
  const path = decodeURI(location.pathname);
  const base = decodeURI(BASE.pathname);
  const rest = path.startsWith(base) ? path.slice(base.length) : '';
  return rest.replace(/\/+$/, '');
}

function go(path, { replace = false } = {}) {
  history[replace ? 'replaceState' : 'pushState'](null, '', new URL(path, BASE));
  render();
}

function chrome(who, route) {
  const nav = document.getElementById('nav');
  const whoBox = document.getElementById('who');
  nav.replaceChildren();
  whoBox.replaceChildren();
  if (!who) return;
  nav.append(h('ul', {}, (NAV[who.role] || []).map(([path, text]) =>
    h('li', {}, h('a', { href: path, 'data-nav': true, 'aria-current': route?.nav === path ? 'page' : null }, text)))));
  whoBox.append(
    h('span', {}, `${who.tenant} · ${who.role}`),
    h('button', { type: 'button', onclick: () => { session.clear(); go('./'); } }, 'Sign out'),
  );
}

async function render(message) {
  shown?.abort();
  shown = new AbortController();
  const { signal } = shown;
  const main = document.getElementById('main');
  const who = session.get();
  const path = pagePath();
  const route = ROUTES.find((r) => r.path.test(path));
  chrome(who, route);
  main.replaceChildren();
  if (!who) {
    signIn(main, message);
    return;
  }
  if (!route) {
    main.append(h('h1', {}, 'Not found'), h('p', {}, 'The console has no page here. ', h('a', { href: './', 'data-nav': true }, 'Start page')));
    return;
  }
  if (route.roles && !route.roles.includes(who.role)) {
    document.title = 'Not available · Longhaul console';
    main.append(
      h('h1', {}, 'Not available with this key'),
      h('p', {}, `A ${who.role} key cannot open this page. `, h('a', { href: './', 'data-nav': true }, 'Go to your start page')),
    );
    return;
  }
  const params = path.match(route.path).slice(1).map(decodeURIComponent);
  try {
    await route.page(main, params, { signal, who, query: new URLSearchParams(location.search) });
  } catch (error) {
    if (signal.aborted || error.name === 'AbortError') return;
    main.append(problemBox(error));
  }
  const heading = main.querySelector('h1');
  if (heading) {
    document.title = `${heading.textContent} · Longhaul console`;
    heading.setAttribute('tabindex', '-1');
    if (document.activeElement === document.body || document.activeElement?.closest('nav, #who')) heading.focus();
  }
}

document.addEventListener('click', (event) => {
  const link = event.target.closest?.('a[data-nav]');
  if (!link || event.defaultPrevented || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey) return;
  event.preventDefault();
  go(link.getAttribute('href'));
});
window.addEventListener('popstate', () => render());

function home(main, _, { who }) {
  go(who.role === 'reviewer' || who.role === 'pii_reviewer' ? 'reviews' : 'jobs', { replace: true });
}

// ------------------------------------------------------------------------------------------------ sign in

function signIn(main, message) {
  document.title = 'Sign in · Longhaul console';
  const input = h('input', {
    id: 'api-key', name: 'api-key', type: 'password', autocomplete: 'off', spellcheck: 'false', required: true,
    'aria-describedby': 'api-key-hint',
  });
  const error = h('p', { class: 'alert', role: 'alert', id: 'signin-error', tabindex: '-1' }, message || '');
  const button = h('button', { type: 'submit', class: 'primary' }, 'Sign in');
  const form = h(
    'form',
    { class: 'signin', novalidate: true },
    h('h1', {}, 'Sign in'),
    h('label', { for: 'api-key' }, 'API key'),
    input,
    h('p', { class: 'hint', id: 'api-key-hint' }, 'Kept for this browser tab only, and sent to this site’s API alone.'),
    error,
    button,
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const key = input.value.trim();
    if (!key) {
      error.textContent = 'Enter your API key.';
      input.setAttribute('aria-invalid', 'true');
      input.focus();
      return;
    }
    button.disabled = true;
    try {
      const me = await api('v1/me', { key });
      session.set({ key, tenant: me.tenant_id, role: me.role });
      render();
    } catch (problem) {
      error.textContent = problem.status === 401 ? 'This API key is not known here.' : problem.message;
      input.setAttribute('aria-invalid', 'true');
      input.focus();
    } finally {
      button.disabled = false;
    }
  });
  main.append(form);
  input.focus();
}

// ------------------------------------------------------------------------------------------------ jobs

async function jobsPage(main, _, { signal, who, query }) {
  const ops = who.role === 'operator';
  const status = query.get('status') || '';
  const tenant = query.get('tenant') || '';
  // The listing's other filters (GET /v1/jobs and /v1/ops/jobs): workflow, SLA class, creation window, id or words.
  const narrow = listFilters(query);
  main.append(h('h1', {}, ops ? 'Every tenant’s jobs' : 'Jobs'));

  const statusSelect = h('select', { id: 'filter-status', name: 'status' },
    h('option', { value: '' }, 'Any status'),
    JOB_STATUSES.map((s) => h('option', { value: s, selected: s === status }, s.replaceAll('_', ' '))));
  const tenantInput = ops ? h('input', { id: 'filter-tenant', name: 'tenant', value: tenant, size: 14 }) : null;
  const filters = h('form', { class: 'filters', role: 'search' },
    h('div', {}, h('label', { for: 'filter-status' }, 'Status'), statusSelect),
    ops ? h('div', {}, h('label', { for: 'filter-tenant' }, 'Tenant'), tenantInput) : null,
    narrow.fields,
    h('button', { type: 'submit' }, 'Show'));
  const apply = (event) => {
    event?.preventDefault();
    go(`jobs${qs({ status: statusSelect.value, tenant: tenantInput?.value.trim(), ...narrow.values() })}`);
  };
  filters.addEventListener('submit', apply);
  statusSelect.addEventListener('change', apply);
  main.append(filters);
  if (ops) main.append(bulkPanel({ status, tenant, workflow: narrow.given.workflow }, { signal }));

  const body = h('tbody');
  const more = h('button', { type: 'button', class: 'more', hidden: true }, 'Load more');
  let showTenant = false;
  const head = h('thead');
  const table = h('table', {}, h('caption', { class: 'visually-hidden' }, 'Jobs, newest first'), head, body);
  main.append(h('div', { class: 'table-wrap' }, table), more);

  const path = (cursor) => (ops
    ? `v1/ops/jobs${qs({ tenant, status, ...narrow.given, limit: 50, cursor })}`
    : `v1/jobs${qs({ status, ...narrow.given, limit: 50, cursor })}`);
  const row = (job) => h('tr', { 'data-job': job.job_id },
    h('td', {}, h('a', { href: `jobs/${enc(job.job_id)}`, 'data-nav': true, class: 'mono' }, job.job_id)),
    showTenant ? h('td', {}, job.tenant_id ?? '—') : null,
    h('td', {}, job.workflow),
    h('td', {}, badge(job.status)),
    h('td', {}, progressOf(job.progress)),
    h('td', { class: 'num', title: when(job.created_at) }, age(job.created_at)),
    h('td', { class: 'num' }, usd(job.cost?.total)));
  const header = () => head.replaceChildren(h('tr', {},
    ['Job', showTenant ? 'Tenant' : null, 'Workflow', 'Status', 'Progress', 'Age', 'Cost'].filter(Boolean)
      .map((t) => h('th', { scope: 'col', class: ['Age', 'Cost'].includes(t) ? 'num' : null }, t))));
  let cursor = null;
  let pages = 1;
  const fill = (listing, replace) => {
    showTenant = showTenant || (ops && listing.jobs.some((j) => j.tenant_id));
    header();
    const rows = listing.jobs.map(row);
    if (replace) body.replaceChildren(...rows);
    else body.append(...rows);
    const filtered = status || Object.keys(narrow.given).length;
    if (!body.children.length && !listing.next_cursor) body.append(h('tr', {}, h('td', { colspan: 7 }, filtered ? 'No job matches these filters.' : 'No jobs yet.')));
    cursor = listing.next_cursor;
    more.hidden = !cursor;
  };
  fill(await api(path(), { signal }), true);
  more.addEventListener('click', async () => {
    more.disabled = true;
    try {
      fill(await api(path(cursor), { signal }), false);
      pages += 1;
    } catch (error) {
      more.after(problemBox(error));
    } finally {
      more.disabled = false;
    }
  });
  // The first page keeps itself current (the newest jobs are there) until more pages are shown.
  (async () => {
    while (!signal.aborted) {
      await sleep(5000, signal);
      if (signal.aborted || pages > 1 || document.hidden) continue;
      try {
        fill(await api(path(), { signal }), true);
      } catch {
        // the next round tries again
      }
    }
  })();
}

async function jobPage(main, [jobId], { signal, who }) {
  const ops = who.role === 'operator';
  const base = ops ? `v1/ops/jobs/${enc(jobId)}` : `v1/jobs/${enc(jobId)}`;
  const state = {
    job: null, graph: null, result: null, cursor: '0', internal: false, showAll: false, seen: new Set(), actionsFor: null,
    offered: {}, // a steering route this API answered 404/405: false
    provisional: null, provisionalOffered: true, provisionalLoading: null,
    trace: null, traceKey: null, timingKey: undefined, traceOffered: true, traceProblem: null, traceView: { open: new Set(), showAll: new Set() },
  };

  const head = h('div');
  const actions = h('div', { class: 'actions' });
  const notices = h('div');
  const graphPanel = section('Workflow', 'graph-heading', 'steps');
  const graphBody = h('div');
  const internal = h('input', { type: 'checkbox', id: 'graph-internal', 'aria-describedby': 'graph-hint' });
  const showAll = h('input', { type: 'checkbox', id: 'graph-all' });
  const allBox = h('div', { hidden: true }, showAll, h('label', { for: 'graph-all', class: 'inline' }, ' Also the failure path not taken'));
  const graphHint = h('p', { class: 'hint', id: 'graph-hint' });
  const hintText = () => (state.internal
    ? 'The state machine’s own states, each with this job’s status (the failure path where the job took it).'
    : 'The workflow’s steps, each with this job’s status; a fan-out runs one item per document or group. '
      + 'A step’s internal states (its routing, tallies and failure path) are folded into it.');
  graphHint.textContent = hintText();
  graphPanel.append(
    graphHint,
    graphBody,
    h('div', {}, internal, h('label', { for: 'graph-internal', class: 'inline' }, ' Show internal states')),
    allBox,
  );
  internal.addEventListener('change', () => {
    state.internal = internal.checked;
    allBox.hidden = !internal.checked;
    graphHint.textContent = hintText();
    drawGraph();
  });
  showAll.addEventListener('change', () => { state.showAll = showAll.checked; drawGraph(); });
  const usagePanel = section('Usage and cost', 'usage-heading', 'cost');
  const usageBody = h('div');
  usagePanel.append(usageBody);
  const eventsPanel = section('Events', 'events-heading', 'events');
  const live = h('p', { class: 'hint', id: 'live-state' }, 'Loading events…');
  const timeline = h('ol', { class: 'timeline', 'aria-labelledby': 'events-heading', tabindex: '0' });
  eventsPanel.append(live, timeline);
  const resultPanel = ops ? null : section('Result', 'result-heading', 'validation');
  const resultBody = h('div');
  resultPanel?.append(resultBody);
  const steering = h('div', { id: 'steering' });
  const draftPanel = section('Draft, as it is written', 'stream-heading');
  draftPanel.id = 'draft-stream';
  draftPanel.hidden = true; // until the stream brings text
  const draftState = h('p', { class: 'hint', id: 'stream-state', 'aria-live': 'polite' });
  const latestCall = h('div', { class: 'latest-call' });
  const earlierList = h('ol', { class: 'earlier-calls', reversed: true });
  const earlierCalls = h('details', { hidden: true }, h('summary', {}, 'Earlier calls'), earlierList);
  draftPanel.append(draftState, latestCall, earlierCalls);
  const tracePanel = section('Where the time went', 'trace-heading', 'trace');
  tracePanel.id = 'trace';
  tracePanel.hidden = true; // until the job view has a `timing` or the trace route answers
  const timingBody = h('div');
  const waterfallHead = h('h3', { id: 'waterfall-heading', hidden: true }, 'Spans, on one time axis');
  const waterfallBody = h('div', { id: 'waterfall', 'aria-labelledby': 'waterfall-heading' });
  const traceAgain = h('button', { type: 'button', class: 'link', hidden: true }, 'Read the trace again');
  traceAgain.addEventListener('click', () => loadTrace({ now: true }));
  tracePanel.append(timingBody, waterfallHead, h('p', { class: 'hint', id: 'trace-id', hidden: true }), waterfallBody, traceAgain);
  main.append(head, actions, steering, notices,
    h('div', { class: 'job-grid' }, h('div', {}, graphPanel), h('div', {}, draftPanel, resultPanel, usagePanel, eventsPanel)),
    tracePanel);

  function drawHead() {
    const job = state.job;
    head.replaceChildren(
      h('div', { class: 'job-head' }, h('h1', { class: 'mono' }, job.job_id), badge(job.status),
        manualLink('status', 'job statuses')),
      facts([
        ['Workflow', job.workflow],
        job.tenant_id ? ['Tenant', job.tenant_id] : null,
        ['Current step', job.current_step || '—'],
        TERMINAL.has(job.status) ? null : ['Progress', progressOf(job.progress)],
        TERMINAL.has(job.status) ? null : etaFact(job.progress),
        ['Submitted', when(job.created_at)],
        ['Finished', when(job.finished_at)],
        ['Attempts', String(job.attempts)],
        ['SLA class', job.sla_class],
        job.parent ? ['Parent job', jobLink(job.parent)] : null,
        job.children?.length ? ['Child jobs', job.children.map((c, i) => [i ? ', ' : '', jobLink(c.job_id), ` (${c.workflow}, ${c.status})`])] : null,
        job.then_job_id ? ['Then', jobLink(job.then_job_id)] : null,
        job.trigger ? ['Started by', triggerText(job.trigger)] : null,
      ], { row: true }),
    );
    notices.replaceChildren();
    const waiting = job.waiting || (job.status === 'paused' ? { reason: 'paused', detail: 'the job waits at a step boundary, holding no compute, until it is resumed' } : null);
    if (waiting && !TERMINAL.has(job.status)) {
      notices.append(h('div', { class: `note wait ${waiting.reason}`, id: 'wait-state', role: 'status', 'data-reason': waiting.reason },
        h('strong', {}, `${WAIT_REASONS[waiting.reason] || String(waiting.reason).replaceAll('_', ' ')}`),
        waiting.detail ? `: ${waiting.detail}` : '',
        waiting.until ? [' — until ', h('time', { datetime: waiting.until }, clock(waiting.until)), ' (', countdown(waiting.until), ')'] : ''));
    }
    if (job.error) {
      notices.append(h('div', { class: 'alert', role: 'status' },
        h('strong', {}, `${job.error.kind} at ${job.error.step ?? 'the job'}: `), job.error.message,
        job.error.items?.length ? ` (items ${job.error.items.join(', ')})` : '', ' ', manualLink('errors', 'error kinds')));
    }
    if (job.escalation) notices.append(escalationNote(job.escalation));
    if (job.cancellation) {
      notices.append(h('div', { class: 'note', role: 'status', id: 'cancellation' },
        h('strong', {}, 'Cancelled by an operator: '), job.cancellation.message));
    }
    if (job.review) {
      notices.append(h('div', { class: 'note' },
        h('strong', {}, 'Review: '), `${job.review.status}, ${job.review.review_id}, assigned to ${job.review.assignee_group}; `,
        job.review.status === 'pending' ? `deadline ${when(job.review.deadline)} (${timeLeft(job.review.deadline)})` : '',
        ' ', manualLink('review', 'human review')));
    }
    if (state.actionsFor !== job.status) drawActions(); // (a refresh keeps a confirmation or a form being filled)
  }

  function drawActions() {
    const job = state.job;
    state.actionsFor = job.status;
    actions.replaceChildren();
    actions.nextElementSibling?.classList.contains('replay-form') && actions.nextElementSibling.remove();
    const steerable = !TERMINAL.has(job.status) && job.status !== 'cancel_requested';
    if (!steerable) steering.replaceChildren();
    if (steerable && job.status !== 'paused' && state.offered.pause !== false) {
      actions.append(steerButton('pause', 'Pause', 'Pausing'));
    }
    if (job.status === 'paused' && state.offered.resume !== false) {
      actions.append(steerButton('resume', 'Resume', 'Resuming', 'primary'));
    }
    if (steerable && state.offered.update !== false) {
      const open = h('button', { type: 'button', 'aria-expanded': 'false', 'aria-controls': 'update-form' }, 'Update…');
      open.addEventListener('click', () => {
        if (steering.querySelector('#update-form')) {
          steering.replaceChildren();
          open.setAttribute('aria-expanded', 'false');
          return;
        }
        open.setAttribute('aria-expanded', 'true');
        steering.replaceChildren(updateForm(() => { open.setAttribute('aria-expanded', 'false'); open.focus(); }));
      });
      actions.append(open);
    }
    if (!TERMINAL.has(job.status) && job.status !== 'cancel_requested') {
      const cancel = h('button', { type: 'button', class: 'danger' }, 'Cancel job');
      cancel.addEventListener('click', () => {
        const sure = h('button', { type: 'button', class: 'danger' }, 'Yes, cancel it');
        const keep = h('button', { type: 'button' }, 'Keep it running');
        const ask = h('span', { role: 'group', 'aria-label': 'Confirm cancellation' }, 'Cancel this job? ', sure, ' ', keep);
        cancel.replaceWith(ask);
        sure.focus();
        keep.addEventListener('click', drawActions);
        sure.addEventListener('click', async () => {
          sure.disabled = true;
          try {
            const outcome = await api(`${base}/cancel`, { method: 'POST', signal });
            announce(`Job ${outcome.status}: ${outcome.message}`);
            await refresh();
          } catch (error) {
            actions.append(problemBox(error));
          }
        });
      });
      actions.append(cancel);
    }
    if (ops && job.status === 'failed') {
      const open = h('button', { type: 'button', 'aria-controls': 'manual-completion-form' }, 'Hand to a person…');
      open.addEventListener('click', () => {
        open.disabled = true;
        actions.after(handForm(job.job_id, { signal, onOpened: () => refresh() }));
      });
      actions.append(open);
    }
    if (ops && (!TERMINAL.has(job.status) || job.status === 'failed')) {
      const end = h('button', { type: 'button', class: 'danger', 'aria-expanded': 'false', 'aria-controls': 'terminate-form' }, 'Terminate…');
      end.addEventListener('click', () => {
        if (steering.querySelector('#terminate-form')) {
          steering.replaceChildren();
          end.setAttribute('aria-expanded', 'false');
          return;
        }
        end.setAttribute('aria-expanded', 'true');
        steering.replaceChildren(terminateForm(job, { signal, onDone: () => { steering.replaceChildren(); refresh(); } }));
      });
      actions.append(end);
    }
    if (ops && REPLAYABLE.has(job.status)) {
      const open = h('button', { type: 'button' }, 'Replay…');
      open.addEventListener('click', () => {
        open.disabled = true;
        const steps = state.graph && !state.graph.error ? stepOrder(state.graph) : [];
        actions.after(replayForm(job.job_id, {
          fromStep: job.error?.step || steps[0],
          steps,
          signal,
          onStarted: () => { refresh(); follow(); },
        }));
      });
      actions.append(open);
    }
    if (ops) {
      actions.append(repairActions({
        getJob: () => state.job,
        after: actions,
        signal,
        refresh,
        openReplay: (fromStep) => {
          const steps = state.graph && !state.graph.error ? stepOrder(state.graph) : [];
          actions.after(replayForm(job.job_id, { fromStep, steps, signal, onStarted: () => { refresh(); follow(); } }));
        },
      }));
    }
  }

  // Pause or resume (POST …/pause|resume); a refusal (409: the job's status) is shown beside the buttons.
  function steerButton(action, label, doing, kind) {
    const button = h('button', { type: 'button', class: kind || null, 'data-action': action }, label);
    button.addEventListener('click', async () => {
      button.disabled = true;
      steering.querySelector('.steer-problem')?.remove();
      try {
        const outcome = await api(`${base}/${action}`, { method: 'POST', body: {}, signal });
        announce(`${doing} job ${jobId}${outcome?.status ? `: ${String(outcome.status).replaceAll('_', ' ')}` : ''}`);
        await refresh();
      } catch (error) {
        if (error.name === 'AbortError') return;
        button.disabled = false;
        if (STEER_ROUTE_MISSING.has(error.status)) {
          state.offered[action] = false;
          button.remove();
          steering.prepend(h('p', { class: 'hint steer-problem' }, `This API does not offer “${label}”.`));
          return;
        }
        const box = problemBox(error);
        box.classList?.add('steer-problem');
        steering.prepend(box);
      }
    });
    return button;
  }

  // Update a running job (PATCH): a deadline from now, a budget, instructions for the model steps still to start.
  // Only the filled fields are sent; a 422's errors are shown at their fields, a 409's detail above them.
  function updateForm(close) {
    const deadline = h('input', { id: 'update-deadline_seconds', name: 'deadline_seconds', type: 'number', min: 1, step: 1, inputmode: 'numeric', 'aria-describedby': 'update-deadline-hint' });
    const tokens = h('input', { id: 'update-max_tokens', name: 'max_tokens', type: 'number', min: 1, step: 1, inputmode: 'numeric' });
    const cost = h('input', { id: 'update-max_cost_usd', name: 'max_cost_usd', type: 'text', inputmode: 'decimal', size: 10 });
    const instructions = h('textarea', { id: 'update-instructions', name: 'instructions', rows: 3, maxlength: 4000 });
    const fields = { deadline_seconds: deadline, max_tokens: tokens, max_cost_usd: cost, instructions };
    const alert = h('div', { class: 'alert', role: 'alert', tabindex: '-1' });
    const done = h('div', { role: 'status' });
    const save = h('button', { type: 'submit', class: 'primary' }, 'Update job');
    const form = h('form', { id: 'update-form', class: 'update-form', novalidate: true, 'aria-label': `Update ${jobId}` },
      h('h3', {}, 'Update the running job'),
      h('p', { class: 'hint' }, 'Fill only what changes. Limits stay within the tenant’s policy; instructions reach the model steps that start after the update.'),
      h('div', { class: 'update-grid' },
        h('div', {}, h('label', { for: deadline.id }, 'Deadline (seconds from now)'), deadline,
          h('p', { class: 'hint', id: 'update-deadline-hint' }, 'The job expires this long after the update.')),
        h('div', {}, h('label', { for: tokens.id }, 'Budget: tokens'), tokens),
        h('div', {}, h('label', { for: cost.id }, 'Budget: dollars'), cost)),
      h('label', { for: instructions.id }, 'Instructions (up to 4,000 characters)'), instructions,
      h('div', { class: 'actions' }, save, h('button', { type: 'button', onclick: () => { steering.replaceChildren(); close(); } }, 'Close')),
      alert, done);
    form.addEventListener('submit', async (event) => {
      event.preventDefault();
      for (const input of Object.values(fields)) clearFieldError(input);
      alert.textContent = '';
      done.textContent = '';
      const body = {};
      const whole = (input) => (/^\d+$/.test(input.value.trim()) ? Number(input.value.trim()) : input.value.trim());
      if (deadline.value.trim()) body.deadline_seconds = whole(deadline);
      const budget = {};
      if (tokens.value.trim()) budget.max_tokens = whole(tokens);
      if (cost.value.trim()) budget.max_cost_usd = cost.value.trim();
      if (Object.keys(budget).length) body.budget = budget;
      if (instructions.value.trim()) body.instructions = instructions.value.trim();
      if (!Object.keys(body).length) {
        alert.textContent = 'Fill at least one field to update the job.';
        alert.focus();
        return;
      }
      save.disabled = true;
      try {
        await api(base, { method: 'PATCH', body, signal });
        for (const input of Object.values(fields)) input.value = '';
        done.replaceChildren(h('p', { class: 'ok' }, `Updated: ${Object.keys(body).map((k) => k.replaceAll('_', ' ')).join(', ')}. The job’s events record it.`));
        await refresh();
      } catch (error) {
        if (error.name === 'AbortError') return;
        if (error.status === 422) showFieldErrors(error, fields, alert);
        else if (STEER_ROUTE_MISSING.has(error.status)) {
          state.offered.update = false;
          alert.textContent = 'This API does not offer updating a running job.';
          alert.focus();
        } else {
          alert.textContent = error.body?.title && error.body.title !== error.message ? `${error.body.title}: ${error.message}` : error.message;
          alert.focus();
        }
      } finally {
        save.disabled = false;
      }
    });
    setTimeout(() => deadline.focus());
    return form;
  }

  function drawGraph() {
    const graph = state.graph;
    if (!graph) return;
    if (graph.error) {
      graphBody.replaceChildren(problemBox(graph.error));
      return;
    }
    const legend = h('ul', { class: 'legend', 'aria-label': 'Legend' }, Object.entries(STATUS_TEXT).map(([status, text]) =>
      h('li', {}, h('span', { class: `swatch ${status}`, 'aria-hidden': 'true' }, text.icon), text.label)));
    const listed = (state.internal ? graph : fold(graph)).nodes
      .filter((n) => (state.internal && state.showAll) || !n.failure_path || n.entered);
    const list = h('details', {}, h('summary', {}, state.internal ? 'The states as a list' : 'The steps as a list'),
      h('ol', {}, listed.map((n) => h('li', { 'data-state': n.name }, `${n.name} — ${STATUS_TEXT[n.status].label}`))));
    const fanOuts = graph.fan_outs.filter((f) => f.total || f.completed || f.failed);
    graphBody.replaceChildren(
      legend,
      fanOuts.length ? h('ul', { class: 'fanouts', 'aria-label': 'Fan-outs' }, fanOuts.map((f) => h('li', { 'data-step': f.step },
        h('strong', {}, `${f.step}: `),
        h('progress', { value: f.completed, max: f.total || 1, 'aria-label': `${f.step}: ${fanOutText(f)}` }),
        h('span', { class: 'progress-text' }, fanOutText(f))))) : '',
      h('div', { class: 'graph-box' }, renderGraph(graph, { internal: state.internal, showAll: state.showAll })),
      list,
    );
  }

  function drawUsage() {
    const job = state.job;
    const cost = job.cost;
    const budget = job.budget;
    usageBody.replaceChildren(facts([
      ['Model tokens', `${int(job.usage?.input_tokens)} in, ${int(job.usage?.output_tokens)} out`],
      ['Model cost', usd(cost?.model?.usd ?? job.usage?.cost_usd)],
      cost ? ['Orchestration', `${usd(cost.orchestration.usd)} — ${cost.orchestration.transitions ?? '…'} transitions, `
        + `${int(cost.orchestration.lambda_invocations)} Lambda invocations, ${cost.orchestration.lambda_gb_seconds.toFixed(2)} GB-s`] : null,
      cost ? ['Total', h('span', {}, h('strong', {}, usd(cost.total)), cost.estimated ? ' (so far)' : '', ` · prices of ${cost.region}, ${cost.prices_as_of}`)] : null,
      budget ? ['Budget', [h('progress', { value: budget.held_tokens, max: budget.max_tokens, 'aria-label': 'Tokens held of the budget' }),
        h('span', { class: 'progress-text' }, `${int(budget.held_tokens)} of ${int(budget.max_tokens)} tokens; `
          + `${usd(budget.held_cost_usd)} of ${usd(budget.max_cost_usd)}${budget.exhausted ? ` — exhausted (${budget.exhausted})` : ''}`)]] : null,
    ]));
  }

  function addEvents(events) {
    const atBottom = timeline.scrollTop + timeline.clientHeight >= timeline.scrollHeight - 8;
    for (const event of events) {
      if (state.seen.has(event.seq)) continue;
      state.seen.add(event.seq);
      state.cursor = String(event.seq);
      if (event.type === 'provisional_result' && !TERMINAL.has(state.job?.status)) {
        state.provisionalOffered = true;
        state.provisionalLoading = null;
        loadProvisional();
      }
      const where = event.step ? `${event.step}${event.item !== null && event.item !== undefined ? ` #${event.item}` : ''}` : '';
      const detail = Object.entries(event.detail || {}).map(([k, v]) => `${k}: ${typeof v === 'object' ? JSON.stringify(v) : v}`).join(', ');
      timeline.append(h('li', { 'data-type': event.type },
        h('time', { datetime: event.at, title: when(event.at) }, clock(event.at)),
        h('span', { class: 'type' }, event.type, event.status ? ' ' : '', event.status ? badge(event.status) : ''),
        h('span', { class: 'detail' }, [where, detail.length > 220 ? `${detail.slice(0, 219)}…` : detail].filter(Boolean).join(' — '))));
    }
    if (atBottom) timeline.scrollTop = timeline.scrollHeight;
  }

  async function drawResult() {
    if (!resultPanel) return;
    const job = state.job;
    if (job.status !== 'completed') {
      if (TERMINAL.has(job.status)) {
        resultPanel.classList.remove('provisional');
        resultBody.replaceChildren(h('p', { class: 'hint' }, `The job ended ${job.status}: no result.`));
        return;
      }
      if (state.provisional) return; // shown until the final result replaces it
      resultBody.replaceChildren(h('p', { class: 'hint' }, 'The result appears here when the job completes.'));
      if (state.provisionalOffered && state.provisionalLoading === null) loadProvisional();
      return;
    }
    if (state.result) return; // drawn once: a refresh keeps what the reader opened in it
    showFinal(await api(`v1/jobs/${enc(jobId)}/result`, { signal }));
  }

  function showFinal(result) {
    const replaced = state.provisional;
    state.result = result;
    state.provisional = null;
    resultPanel.classList.remove('provisional');
    resultBody.replaceChildren(
      replaced ? h('p', { class: 'hint', id: 'final-note' }, `The final result (it replaced the provisional one of step ${replaced.as_of_step ?? '…'}).`) : '',
      resultView(withoutMarks(result), { jobId, signal }));
  }

  // The provisional result (GET …/result?provisional=true): 409 while there is none; 200 with `provisional: false`
  // once the job has completed. Asked once as the page opens and again at each `provisional_result` event.
  async function loadProvisional() {
    if (!resultPanel || !state.provisionalOffered || state.result) return;
    if (state.provisionalLoading) return state.provisionalLoading;
    state.provisionalLoading = (async () => {
      try {
        const result = await api(`v1/jobs/${enc(jobId)}/result${qs({ provisional: 'true' })}`, { signal });
        if (state.result) return;
        if (result.provisional === false) {
          showFinal(result);
          return;
        }
        state.provisional = result;
        resultPanel.classList.add('provisional');
        resultBody.replaceChildren(
          h('p', { class: 'provisional-note', id: 'provisional-note', role: 'status' }, h('strong', {}, 'Provisional'),
            ` — as of step ${result.as_of_step ?? '…'}, before the job’s last checks; the final result replaces it when the job completes.`),
          resultView(withoutMarks(result), { jobId, signal }));
        announce('A provisional result is shown');
      } catch (error) {
        if (error.name === 'AbortError') return;
        if (error.status !== 409) state.provisionalOffered = false; // 400/404/405/422: this API has none to give
      } finally {
        state.provisionalLoading = undefined; // asked: again only on an event
      }
    })();
    return state.provisionalLoading;
  }

  // ---- the trace: where the time went (the job view's `timing`) and the waterfall of its spans (GET …/trace).
  function drawTiming() {
    const key = JSON.stringify(state.job.timing ?? null);
    if (key === state.timingKey) return; // unchanged: the bar the reader looks at stays as it is
    state.timingKey = key;
    const timing = renderTiming(state.job.timing);
    timingBody.replaceChildren(timing || '');
    tracePanel.hidden = !timing && !state.trace;
  }

  function drawTrace(target) {
    const trace = state.trace;
    // a redraw keeps the reader's place: the span name or "show all" button that had the focus has it again
    const had = waterfallBody.contains(document.activeElement) ? document.activeElement : null;
    const focus = target || (had && {
      span: had.closest('li[data-span-id]')?.dataset.spanId,
      family: had.dataset.family,
    });
    const shown = Boolean(trace) && state.traceOffered;
    waterfallHead.hidden = !shown;
    traceAgain.hidden = !shown;
    const traceId = tracePanel.querySelector('#trace-id');
    traceId.hidden = !shown || !trace.trace_id;
    if (!shown) {
      waterfallBody.replaceChildren(state.traceOffered && state.traceProblem ? state.traceProblem : '');
      tracePanel.hidden = !state.job?.timing && !(state.traceOffered && state.traceProblem);
      return;
    }
    tracePanel.hidden = false;
    traceId.replaceChildren('Trace ', h('span', { class: 'mono' }, trace.trace_id || ''),
      ' — the same id in every function’s logs and in a tracing backend.');
    waterfallBody.replaceChildren(state.traceProblem || '', renderWaterfall(trace, state.traceView, (target) => drawTrace(target)));
    if (focus?.span) waterfallBody.querySelector(`li[data-span-id="${CSS.escape(focus.span)}"] .span-name`)?.focus();
    if (focus?.family) waterfallBody.querySelector(`button.show-all[data-family="${CSS.escape(focus.family)}"]`)?.focus();
  }

  // Read the trace: at most every TRACE_EVERY_MS while the job runs (a later call waits for its turn), at once when
  // asked (`now`). A 404/405 is a route this API does not have: the waterfall is left out, and not asked for again.
  const traceLoad = { at: 0, running: null, again: false, timer: null };
  signal.addEventListener('abort', () => clearTimeout(traceLoad.timer));
  function loadTrace({ now = false } = {}) {
    if (!state.traceOffered || signal.aborted) return;
    if (traceLoad.running) {
      traceLoad.again = true;
      return;
    }
    const wait = now ? 0 : traceLoad.at + TRACE_EVERY_MS - Date.now();
    clearTimeout(traceLoad.timer);
    if (wait > 0) {
      traceLoad.timer = setTimeout(() => loadTrace(), wait);
      return;
    }
    traceLoad.running = (async () => {
      let changed = false;
      try {
        const trace = await api(`${base}/trace`, { signal });
        const key = JSON.stringify(trace);
        changed = key !== state.traceKey || Boolean(state.traceProblem); // the same spans are not drawn again
        state.trace = trace;
        state.traceKey = key;
        state.traceProblem = null;
      } catch (error) {
        if (error.name === 'AbortError') return;
        changed = true;
        if (STEER_ROUTE_MISSING.has(error.status)) {
          state.traceOffered = false;
          state.trace = null;
        } else {
          state.traceProblem = h('p', { class: 'hint', id: 'trace-problem' }, `The trace could not be read: ${error.message}`);
        }
      } finally {
        traceLoad.at = Date.now();
        traceLoad.running = null;
      }
      if (signal.aborted) return;
      if (changed) drawTrace();
      if (traceLoad.again) {
        traceLoad.again = false;
        loadTrace();
      }
    })();
  }

  async function refresh() {
    const [job, graph] = await Promise.all([
      api(base, { signal }),
      api(`${base}/graph`, { signal }).catch((error) => ({ error })),
    ]);
    const finishedNow = state.job && !TERMINAL.has(state.job.status) && TERMINAL.has(job.status);
    state.job = job;
    state.graph = graph;
    drawHead();
    drawGraph();
    drawUsage();
    drawTiming();
    loadTrace({ now: finishedNow });
    await drawResult();
    if (finishedNow) announce(`Job ${job.job_id} is ${job.status}`);
  }

  // ---- the draft, streamed (GET …/stream): each model call's text, grouped by call, the latest one first.
  const draft = { calls: new Map(), latest: null, lastId: null, ended: false };

  function callLabel(call) {
    return `${call.step ?? 'model call'}${call.item !== null && call.item !== undefined ? ` #${call.item}` : ''}`;
  }

  function callBox(call) {
    call.text = h('div', { class: 'draft-text' });
    call.status = h('span', { class: 'call-status' }, 'writing…');
    call.box = h('article', { class: 'call', 'data-call': call.call_id, 'data-step': call.step ?? '' },
      h('h3', {}, callLabel(call), ' ', call.status), call.text);
  }

  function onStreamEvent(type, data) {
    if (type === 'end') { // whatever its data says
      draft.ended = true;
      if (draft.latest) draftState.textContent = 'The job has ended; this is what its model calls wrote.';
      return;
    }
    if (type !== 'output_delta' && type !== 'call_finished') return;
    let body;
    try {
      body = JSON.parse(data);
    } catch {
      return;
    }
    let call = draft.calls.get(body.call_id);
    if (!call) {
      call = { call_id: body.call_id, step: body.step, item: body.item, parts: [], finished: false };
      draft.calls.set(body.call_id, call);
      callBox(call);
      if (draft.latest) {
        earlierList.prepend(h('li', {}, draft.latest.box));
        earlierCalls.hidden = false;
        earlierCalls.querySelector('summary').textContent = `Earlier calls (${earlierList.children.length})`;
      }
      draft.latest = call;
      latestCall.replaceChildren(call.box);
      draftPanel.hidden = false;
      draftState.textContent = `Writing: ${callLabel(call)}`;
    }
    if (type === 'output_delta') {
      if (call.parts[body.index] !== undefined) return; // a repeat (a resumed stream): kept once
      call.parts[body.index] = body.text ?? '';
      call.text.textContent = call.parts.join('');
    } else {
      call.finished = true;
      call.status.textContent = `finished${body.output_tokens !== undefined && body.output_tokens !== null ? `, ${int(body.output_tokens)} output tokens` : ''}`;
      call.box.classList.add('finished');
      if (call === draft.latest) draftState.textContent = `${callLabel(call)} finished.`;
    }
  }

  // Server-Sent Events from a fetch's body: `event:`, `data:` (joined by newlines), `id:`, comments; a blank line ends
  // an event. The last id is sent back as `Last-Event-ID` when the stream is opened again.
  async function readEvents(body) {
    const reader = body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = '';
    let event = { type: 'message', data: [], id: null };
    let count = 0;
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return count;
      buffer += value;
      for (let end = buffer.search(/\r\n|\r|\n/); end >= 0; end = buffer.search(/\r\n|\r|\n/)) {
        const line = buffer.slice(0, end);
        buffer = buffer.slice(end + (buffer.startsWith('\r\n', end) ? 2 : 1));
        if (line === '') {
          if (event.id !== null) draft.lastId = event.id;
          if (event.data.length || event.type === 'end') {
            onStreamEvent(event.type, event.data.join('\n'));
            count += 1;
          }
          event = { type: 'message', data: [], id: null };
          continue;
        }
        if (line.startsWith(':')) continue;
        const colon = line.indexOf(':');
        const field = colon < 0 ? line : line.slice(0, colon);
        let text = colon < 0 ? '' : line.slice(colon + 1);
        if (text.startsWith(' ')) text = text.slice(1);
        if (field === 'event') event.type = text;
        else if (field === 'data') event.data.push(text);
        else if (field === 'id' && !text.includes('\u0000')) event.id = text;
      }
    }
  }

  async function streamDraft() {
    let failures = 0;
    while (!signal.aborted && !draft.ended) {
      const headers = { Accept: 'text/event-stream', Authorization: `Bearer ${session.get()?.key ?? ''}` };
      if (draft.lastId !== null) headers['Last-Event-ID'] = draft.lastId;
      let read = 0;
      try {
        const response = await fetch(new URL(`${base}/stream`, API_ROOT), { headers, signal, cache: 'no-store', credentials: 'omit' });
        const type = response.headers.get('Content-Type') || '';
        if (!response.ok || !type.startsWith('text/event-stream')) {
          await response.body?.cancel();
          // 404/405/406: this API has no stream (the page has the events and the result); a busy one: later
          if (response.status < 500 && response.status !== 429) return;
          throw new Error(`the stream answered ${response.status}`);
        }
        failures = 0;
        read = await readEvents(response.body);
      } catch (error) {
        if (signal.aborted || error.name === 'AbortError') return;
        failures += 1;
      }
      if (draft.ended) return;
      // The stream closed without its `end`: opened again from the last id, unless the job has ended meanwhile and
      // nothing more came.
      if (TERMINAL.has(state.job.status) && read === 0) return;
      await sleep(Math.min(10000, 500 * 2 ** failures), signal);
    }
  }

  let timer = null;
  const soon = () => {
    clearTimeout(timer);
    timer = setTimeout(() => refresh().catch(() => {}), 300);
  };
  signal.addEventListener('abort', () => clearTimeout(timer));

  let following = false;
  async function follow() {
    if (following) return;
    following = true;
    live.textContent = TERMINAL.has(state.job.status) ? `The job is ${state.job.status}.` : 'Following the job live.';
    try {
      while (!signal.aborted) {
        try {
          const page = await api(`${base}/events${qs({ cursor: state.cursor, wait: LONG_POLL_SECONDS, limit: 200 })}`, { signal });
          if (page.events.length) {
            addEvents(page.events);
            soon();
            continue;
          }
          // An empty page: the wait ended, or the job has finished (a finished job's long-poll answers at once, and
          // what this page knows of its status may be older than the events it has read). Ask for the job again.
          await refresh();
          if (!TERMINAL.has(state.job.status)) continue;
          // It finished after the events were read: its last ones come once more, without waiting.
          const rest = await api(`${base}/events${qs({ cursor: state.cursor, limit: 200 })}`, { signal });
          if (rest.events.length) {
            addEvents(rest.events);
            continue;
          }
          // Its execution may still run its last states (a callback, the end state): draw them once it ends.
          for (let tries = 0; tries < 30 && state.graph?.execution_status === 'RUNNING' && !signal.aborted; tries += 1) {
            await sleep(1000, signal);
            await refresh();
          }
          if (TERMINAL.has(state.job.status)) {
            live.textContent = `The job is ${state.job.status}.`;
            return;
          }
        } catch (error) {
          if (signal.aborted || error.name === 'AbortError') return;
          live.textContent = 'Lost the connection to the API; trying again in a few seconds.';
          await sleep(3000, signal);
          live.textContent = 'Following the job live.';
        }
      }
    } finally {
      following = false;
    }
  }

  await refresh();
  if (!TERMINAL.has(state.job.status)) streamDraft();
  for (let cursor = '0'; cursor;) {
    const page = await api(`${base}/events${qs({ cursor, limit: 200 })}`, { signal });
    addEvents(page.events);
    cursor = page.next_cursor;
  }
  follow();
}

function etaFact(progress) {
  if (!progress) return null;
  const basis = ETA_BASIS[progress.eta_basis];
  if (progress.estimated_finish_at) {
    return ['Estimated finish', h('span', { id: 'eta' }, h('time', { datetime: progress.estimated_finish_at }, clock(progress.estimated_finish_at)),
      ' (', countdown(progress.estimated_finish_at), basis ? `; ${basis}` : '', ')')];
  }
  if (progress.eta_seconds !== null && progress.eta_seconds !== undefined) {
    return ['Estimated finish', h('span', { id: 'eta' }, `in about ${duration(progress.eta_seconds)}${basis ? ` (${basis})` : ''}`)];
  }
  return null;
}

// A result as the workflow shapes it, without the marks the API adds to it (`provisional`, `as_of_step`).
function withoutMarks(result) {
  const { provisional, as_of_step: asOf, ...rest } = result || {};
  return rest;
}

// ------------------------------------------------------------------------------------------------ results

function resultView(result, { jobId, signal }) {
  if (typeof result.answer === 'string' && Array.isArray(result.claims)) return answerView(result, { jobId, signal });
  if (Array.isArray(result.invoices)) return invoicesView(result);
  return h('pre', {}, JSON.stringify(result, null, 2));
}

function normalizedMatch(text, quote) {
  const exact = text.indexOf(quote);
  if (exact >= 0) return [exact, exact + quote.length];
  const words = quote.trim().split(/\s+/).map((w) => w.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'));
  if (!words.length) return null;
  const found = new RegExp(words.join('\\s+')).exec(text);
  return found ? [found.index, found.index + found[0].length] : null;
}

function answerView(result, { jobId, signal }) {
  const source = h('div', { class: 'source-view', 'aria-live': 'polite', hidden: true, tabindex: '-1', id: 'source-view' });
  let number = 0;
  const show = async (citation, n) => {
    source.hidden = false;
    source.replaceChildren(h('h3', {}, `[${n}] ${citation.document}, page ${citation.page}`), h('p', { class: 'hint' }, 'Loading the page…'));
    let page = null;
    let failure = '';
    if (jobId) {
      try {
        page = await api(`v1/jobs/${enc(jobId)}/pages${qs({ document: citation.document, page: citation.page })}`, { signal });
      } catch (error) {
        failure = error.message;
      }
    }
    const heading = h('h3', {}, `[${n}] ${citation.document}, page ${citation.page}`,
      citation.source === 'ocr' ? ` (read by OCR${citation.ocr_confidence ? `, confidence ${citation.ocr_confidence.toFixed(2)}` : ''})` : '');
    const span = page ? normalizedMatch(page.text, citation.quote) : null;
    if (page && span) {
      const mark = h('mark', { id: 'quote' }, page.text.slice(span[0], span[1]));
      source.replaceChildren(heading, h('div', { class: 'page-text' }, page.text.slice(0, span[0]), mark, page.text.slice(span[1])));
      source.focus();
      mark.scrollIntoView({ block: 'center' });
    } else {
      source.replaceChildren(heading, h('blockquote', {}, citation.quote),
        h('p', { class: 'hint' }, page ? 'The quote is not found word for word in the page’s text.' : `The page’s text is not available${failure ? `: ${failure}` : ''}.`));
      source.focus();
    }
  };
  const claims = h('ol', { class: 'claims' }, result.claims.map((claim) => h('li', {}, claim.text, ' ',
    claim.citations.map((citation) => {
      number += 1;
      const n = number;
      return h('button', {
        type: 'button', class: 'link cite', 'aria-label': `Source ${n}: ${citation.document}, page ${citation.page}`,
        onclick: () => show(citation, n),
      }, `[${n}]`);
    }))));
  const verification = result.verification;
  return h('div', {},
    h('p', { class: 'answer' }, result.answer),
    result.claims.length ? [h('h3', {}, 'Claims, with their sources'), claims, h('p', { class: 'hint' }, 'Choose a source to see its quote in the page’s text.')] : '',
    source,
    verification ? h('p', { class: 'hint' }, `${verification.citations_verified} of ${verification.citations_checked} citations verified on their pages`
      + `${verification.claims_dropped ? `; ${verification.claims_dropped} claim(s) dropped` : ''}.`) : '',
    result.documents?.length ? h('details', {}, h('summary', {}, `Documents (${result.documents.length})`),
      h('ul', {}, result.documents.map((d) => h('li', {}, `${d.name}: ${d.pages} ${plural('page', d.pages)}`,
        d.pages_ocr?.length ? `, read by OCR: ${d.pages_ocr.join(', ')}` : '')))) : '',
  );
}

function sourceLine(source) {
  if (!source) return '—';
  return h('span', {}, `${source.document}, p. ${source.page}: `, h('q', {}, source.quote));
}

function invoicesView(result) {
  const findings = result.invoices.flatMap((invoice) => invoice.discrepancies.map((d) => ({ invoice, d })));
  return h('div', {},
    h('p', { class: 'answer' }, result.summary),
    h('p', { class: 'hint' }, result.summary_source === 'model' ? 'Summary written by the model (every figure in it is a validated number).' : 'Summary computed from the validated figures.'),
    h('div', { class: 'table-wrap' }, h('table', { 'aria-label': 'Findings' },
      h('caption', {}, `Findings (${findings.length})`),
      h('thead', {}, h('tr', {}, ['Invoice', 'Rule', 'Field', 'Expected', 'Actual', 'Source line'].map((t) => h('th', { scope: 'col' }, t)))),
      h('tbody', {}, findings.length ? findings.map(({ invoice, d }) => h('tr', {},
        h('td', {}, invoice.invoice_number || invoice.document),
        h('td', {}, d.rule), h('td', { class: 'mono' }, d.field), h('td', { class: 'num' }, d.expected ?? '—'),
        h('td', { class: 'num' }, d.actual ?? '—'), h('td', {}, sourceLine(d.source), d.note ? h('div', { class: 'hint' }, d.note) : '')))
        : h('tr', {}, h('td', { colspan: 6 }, 'No discrepancies: every invoice matches the contract.'))))),
    h('h3', {}, 'Invoices'),
    result.invoices.map((invoice) => h('details', {},
      h('summary', {}, `${invoice.document}: `, badge(invoice.status === 'matched' ? 'completed' : invoice.status === 'unreadable' ? 'failed' : 'waiting', invoice.status),
        ` ${invoice.invoice_number ?? ''} ${invoice.currency ?? ''} ${invoice.totals?.total ?? ''}`),
      h('div', { class: 'table-wrap' }, h('table', {},
        h('thead', {}, h('tr', {}, ['Product', 'Quantity', 'Unit price', 'Line total', 'Source line'].map((t) => h('th', { scope: 'col' }, t)))),
        h('tbody', {}, invoice.line_items.map((line) => h('tr', {},
          h('td', {}, line.product_code, line.description ? ` — ${line.description}` : ''),
          h('td', { class: 'num' }, line.quantity), h('td', { class: 'num' }, line.unit_price),
          h('td', { class: 'num' }, line.line_total), h('td', {}, sourceLine(line.source))))))))),
  );
}

// ------------------------------------------------------------------------------------------------ reviews

function rungText(review) {
  return `${RUNGS[review.rung ?? 0] ?? `rung ${review.rung}`} · ${review.assignee_group}`;
}

async function reviewsPage(main, _, { signal }) {
  main.append(h('h1', {}, 'Reviews'));
  const pendingBox = h('div');
  const closedBox = h('div');
  main.append(h('h2', { id: 'pending-heading' }, 'Pending'), pendingBox, h('h2', { id: 'closed-heading' }, 'Closed recently'), closedBox);
  const link = (r) => h('a', { href: `reviews/${enc(r.review_id)}`, 'data-nav': true, class: 'mono' }, r.review_id);
  const load = async () => {
    const [pending, decided, expired] = await Promise.all(['pending', 'decided', 'expired'].map((status) =>
      api(`v1/reviews${qs({ status, limit: status === 'pending' ? 200 : 20 })}`, { signal })));
    const urgent = [...pending.reviews].sort((a, b) => Date.parse(a.deadline) - Date.parse(b.deadline));
    pendingBox.replaceChildren(urgent.length ? h('div', { class: 'table-wrap' }, h('table', { 'aria-labelledby': 'pending-heading' },
      h('thead', {}, h('tr', {}, ['Review', 'Job', 'Workflow', 'Waiting', 'Deadline', 'Escalation', 'Why'].map((t) => h('th', { scope: 'col' }, t)))),
      h('tbody', {}, urgent.map((r) => h('tr', { 'data-review': r.review_id, 'data-job': r.job_id },
        h('td', {}, link(r)), h('td', { class: 'mono' }, r.job_id), h('td', {}, r.workflow),
        h('td', { title: when(r.since) }, age(r.since)), h('td', { title: when(r.deadline) }, timeLeft(r.deadline)),
        h('td', {}, rungText(r)), h('td', {}, r.reasons.join('; ') || '—'))))))
      : h('p', {}, 'Nothing waits for review.'));
    const closed = [...decided.reviews, ...expired.reviews]
      .sort((a, b) => Date.parse(b.decided_at || b.deadline) - Date.parse(a.decided_at || a.deadline));
    closedBox.replaceChildren(closed.length ? h('div', { class: 'table-wrap' }, h('table', { 'aria-labelledby': 'closed-heading' },
      h('thead', {}, h('tr', {}, ['Review', 'Job', 'Status', 'Decision', 'When'].map((t) => h('th', { scope: 'col' }, t)))),
      h('tbody', {}, closed.map((r) => h('tr', { 'data-review': r.review_id },
        h('td', {}, link(r)), h('td', { class: 'mono' }, r.job_id), h('td', {}, badge(r.status)),
        h('td', {}, r.decision ?? '—'), h('td', {}, when(r.decided_at || r.deadline)))))))
      : h('p', {}, 'None yet.'));
  };
  await load();
  (async () => {
    while (!signal.aborted) {
      await sleep(10000, signal);
      if (!signal.aborted && !document.hidden) await load().catch(() => {});
    }
  })();
}

function draftView(draft) {
  if (typeof draft.answer === 'string' && Array.isArray(draft.claims)) {
    return h('div', {},
      h('p', { class: 'answer' }, draft.answer),
      h('ol', { class: 'claims' }, draft.claims.map((claim) => h('li', {}, claim.text,
        h('ul', {}, claim.citations.map((c) => h('li', { class: 'hint' }, `${c.document ?? c.chunk_id}${c.page ? `, p. ${c.page}` : ''}: `, h('q', {}, c.quote))))))));
  }
  if (Array.isArray(draft.invoices)) return invoicesView(draft);
  return h('pre', {}, JSON.stringify(draft, null, 2));
}

function editFields(review) {
  const draft = review.draft;
  if (typeof draft.answer === 'string' && Array.isArray(draft.claims)) {
    const claims = draft.claims.map((c) => ({ text: c.text, citations: c.citations.map((x) => ({ chunk_id: x.chunk_id, quote: x.quote })) }));
    return [
      { name: 'answer', label: 'Answer', value: draft.answer, rows: 5 },
      { name: 'claims', label: 'Claims (JSON: text and citations, each citation a chunk_id and its verbatim quote)', value: JSON.stringify(claims, null, 2), json: true, rows: 12 },
    ];
  }
  if (typeof draft.summary === 'string') return [{ name: 'summary', label: 'Summary', value: draft.summary, rows: 6 }];
  return [{ name: 'edits', label: 'Edits (JSON)', value: '{}', json: true, whole: true, rows: 10 }];
}

async function reviewPage(main, [reviewId], { signal }) {
  const path = `v1/reviews/${enc(reviewId)}`;
  let review = await api(path, { signal });
  const jobStatus = h('span', { id: 'job-status' }, review.job_status ? badge(review.job_status) : '—');
  const statusBadge = h('span', {}, badge(review.status));
  main.append(
    h('div', { class: 'job-head' }, h('h1', {}, 'Review ', h('span', { class: 'mono' }, review.review_id)), statusBadge,
      manualLink('reviewing', 'reviewing a job')),
    facts([
      ['Job', h('span', { class: 'mono' }, review.job_id)],
      ['Job status', jobStatus],
      ['Workflow', review.workflow],
      ['Waiting since', `${when(review.since)} (${age(review.since)})`],
      ['Deadline', `${when(review.deadline)} (${review.status === 'pending' ? timeLeft(review.deadline) : review.status})`],
      review.kind === 'complete' ? ['Kind', 'complete: write the failed job’s result'] : ['Escalation', rungText(review)],
      review.decision ? ['Decision', `${review.decision}${review.comment ? ` — “${review.comment}”` : ''}`] : null,
    ]),
    h('section', { class: 'note', 'aria-labelledby': 'reasons-heading' }, h('h2', { id: 'reasons-heading' }, review.kind === 'complete' ? 'Why it was handed to a person' : 'Why review was asked'),
      h('ul', {}, (review.reasons.length ? review.reasons : ['the job asked for review']).map((r) => h('li', {}, r)))),
    h('div', { class: 'review-grid' },
      h('section', { class: 'panel', 'aria-labelledby': 'draft-heading' }, h('h2', { id: 'draft-heading' }, 'Draft'),
        review.redacted ? h('p', { class: 'hint' }, `Personal data (${review.redacted.join(', ')}) is shown as placeholders such as <IBAN_1>; an edit may keep them.`) : null,
        draftView(review.draft)),
      h('section', { class: 'panel', 'aria-labelledby': 'evidence-heading' }, h('h2', { id: 'evidence-heading' }, 'Evidence'),
        review.evidence.length ? h('ul', { class: 'evidence' }, review.evidence.map((e) => h('li', {},
          e.claim ? h('div', {}, h('strong', {}, e.claim)) : '',
          h('div', { class: 'hint' }, `${e.document}${e.page ? `, page ${e.page}` : ''}`),
          h('blockquote', {}, e.quote),
          e.verified ? h('span', { class: 'verified' }, '✓ found on its page') : h('span', { class: 'unverified' }, '✕ not found on its page'))))
          : h('p', {}, 'No evidence was given.'))),
  );

  const decision = h('section', { class: 'decision', 'aria-labelledby': 'decision-heading' }, h('h2', { id: 'decision-heading' }, 'Decision'));
  main.append(decision);
  const outcome = h('div', { role: 'status' });
  const alert = h('div', { class: 'alert', role: 'alert', tabindex: '-1' });

  async function followJob() {
    while (!signal.aborted) {
      try {
        review = await api(path, { signal });
        jobStatus.replaceChildren(review.job_status ? badge(review.job_status) : '—');
        statusBadge.replaceChildren(badge(review.status));
        if (review.job_status && TERMINAL.has(review.job_status)) {
          outcome.append(h('p', { class: 'job-outcome' }, `Job ${review.job_id} is now `, badge(review.job_status), '.'));
          announce(`Job ${review.job_id} is ${review.job_status}`);
          return;
        }
      } catch {
        // try again
      }
      await sleep(1000, signal);
    }
  }

  if (review.kind === 'complete' && review.status === 'pending') {
    completeForm(review, { path, decision, outcome, statusBadge, followJob, signal });
    return;
  }
  if (review.status !== 'pending') {
    decision.append(h('p', {}, `This review is ${review.status}; nothing to decide.`));
    if (review.job_status && !TERMINAL.has(review.job_status)) {
      decision.append(outcome);
      followJob();
    }
    return;
  }

  const comment = h('textarea', { id: 'comment', name: 'comment', rows: 2, maxlength: 2000 });
  const approve = h('button', { type: 'button', class: 'primary' }, 'Approve');
  const reject = h('button', { type: 'button', class: 'danger' }, 'Reject');
  const edit = h('button', { type: 'button', 'aria-expanded': 'false', 'aria-controls': 'edit-form' }, 'Edit');
  const buttons = h('div', { class: 'actions' }, approve, reject, edit);
  const fields = editFields(review);
  const inputs = {};
  const editForm = h('form', { id: 'edit-form', hidden: true, novalidate: true },
    h('h3', {}, 'Edit the draft'),
    h('p', { class: 'hint' }, 'Your edits are checked like the model’s output (citations against their pages) before they are published.'),
    fields.map((f) => {
      inputs[f.name] = h('textarea', { id: `edit-${f.name}`, name: f.name, rows: f.rows, spellcheck: f.json ? 'false' : 'true', class: f.json ? 'mono' : null });
      inputs[f.name].value = f.value;
      return [h('label', { for: `edit-${f.name}` }, f.label), inputs[f.name]];
    }),
    h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary' }, 'Publish edits'),
      h('button', { type: 'button', onclick: () => { editForm.hidden = true; edit.setAttribute('aria-expanded', 'false'); edit.focus(); } }, 'Close the editor')));
  const commentLabel = h('label', { for: 'comment' }, 'Comment (optional)');
  decision.append(commentLabel, comment, buttons, alert, editForm, outcome);

  const all = { comment, ...inputs };
  const send = async (kind, edits) => {
    alert.textContent = '';
    for (const button of [approve, reject, edit]) button.disabled = true;
    try {
      const body = { decision: kind, comment: comment.value.trim() || null, ...(edits ? { edits } : {}) };
      const decided = await api(`${path}/decision`, { method: 'POST', body, signal });
      for (const done of [buttons, editForm, comment, commentLabel, alert]) done.remove();
      statusBadge.replaceChildren(badge('decided'));
      outcome.replaceChildren(h('p', { class: 'ok' }, `${decided.decision === 'approve' ? 'Approved' : decided.decision === 'reject' ? 'Rejected' : 'Edited and approved'}. `
        + `Job ${decided.job_id} goes on; its status follows here.`));
      announce(`Review ${decided.decision}d`);
      followJob();
    } catch (error) {
      for (const button of [approve, reject, edit]) button.disabled = false;
      if (error.name === 'AbortError') return;
      if (error.status === 422) showFieldErrors(error, all, alert);
      else {
        alert.textContent = error.message;
        alert.focus();
      }
    }
  };
  approve.addEventListener('click', () => send('approve'));
  reject.addEventListener('click', () => send('reject'));
  edit.addEventListener('click', () => {
    editForm.hidden = false;
    edit.setAttribute('aria-expanded', 'true');
    inputs[fields[0].name].focus();
  });
  editForm.addEventListener('submit', (event) => {
    event.preventDefault();
    for (const input of Object.values(all)) clearFieldError(input);
    alert.textContent = '';
    const edits = {};
    for (const f of fields) {
      const raw = inputs[f.name].value;
      if (raw === f.value) continue; // unchanged: not an edit
      let value = raw;
      if (f.json) {
        try {
          value = JSON.parse(raw);
        } catch (error) {
          setFieldError(inputs[f.name], `not valid JSON: ${error.message}`);
          inputs[f.name].focus();
          return;
        }
      }
      if (f.whole) Object.assign(edits, value);
      else edits[f.name] = value;
    }
    if (!Object.keys(edits).length) {
      alert.textContent = 'Change something before publishing an edit (or approve the draft as it is).';
      alert.focus();
      return;
    }
    send('edit', edits);
  });
}

// A review of kind `complete`: the job failed and an operator handed it to a person, who writes its result. The
// result is JSON, prefilled with the job's last draft (or the workflow's skeleton); the workflow's result model and
// rules check it, and each refusal is listed with where it is in the result (the review stays open).
function completeForm(review, { path, decision, outcome, statusBadge, followJob, signal }) {
  const result = h('textarea', { id: 'complete-result', name: 'result', rows: 24, spellcheck: 'false', class: 'mono', 'aria-describedby': 'complete-hint' });
  result.value = JSON.stringify(review.draft, null, 2);
  const comment = h('textarea', { id: 'complete-comment', name: 'comment', rows: 2, maxlength: 2000 });
  const submit = h('button', { type: 'submit', class: 'primary' }, 'Complete the job with this result');
  const alert = h('div', { class: 'alert', role: 'alert', tabindex: '-1' });
  const problems = h('ul', { class: 'field-error', id: 'complete-problems' });
  const form = h('form', { id: 'complete-form', novalidate: true, 'aria-label': 'Write the job’s result' },
    h('p', { class: 'hint', id: 'complete-hint' }, 'This job failed and was handed to you', review.note ? `: “${review.note}”` : '',
      '. Write its result below (JSON, as the workflow publishes it); the workflow’s result model and business rules check it ',
      'before the job completes as completed by a person. ', manualLink('completing', 'completing a job by hand')),
    h('label', { for: result.id }, 'Result (JSON)'), result, problems,
    h('label', { for: comment.id }, 'Comment (optional)'), comment,
    h('div', { class: 'actions' }, submit), alert);
  decision.append(form, outcome);
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    alert.textContent = '';
    problems.replaceChildren();
    clearFieldError(result);
    let body;
    try {
      body = JSON.parse(result.value);
    } catch (error) {
      setFieldError(result, `not valid JSON: ${error.message}`);
      result.focus();
      return;
    }
    submit.disabled = true;
    try {
      const decided = await api(`${path}/decision`, {
        method: 'POST', body: { decision: 'complete', result: body, comment: comment.value.trim() || null }, signal,
      });
      form.remove();
      statusBadge.replaceChildren(badge('decided'));
      outcome.replaceChildren(h('p', { class: 'ok' }, `Completed: job ${decided.job_id} is ${decided.job_status || 'completed'}, its result written by hand.`));
      announce(`Job ${decided.job_id} completed by a person`);
      followJob();
    } catch (error) {
      submit.disabled = false;
      if (error.name === 'AbortError') return;
      const errors = error.body?.errors || [];
      if (error.status === 422 && errors.length) {
        const where = (loc) => (loc || []).map(String).filter((part, n) => !(n < 2 && ['body', 'result'].includes(part))).join('.');
        problems.replaceChildren(...errors.map((item) => h('li', {}, h('code', {}, where(item.loc) || 'result'), `: ${item.msg}`)));
        result.setAttribute('aria-invalid', 'true');
        alert.textContent = `${error.message} — the review stays open: correct the result and submit again.`;
      } else {
        alert.textContent = error.message;
      }
      alert.focus();
    }
  });
}

// ------------------------------------------------------------------------------------------------ operations

// An operator hands a failed job to a person (POST …/manual-completion): a review of kind `complete` opens for a
// group of reviewers, who write the job's result.
function handForm(jobId, { signal, onOpened }) {
  const group = h('input', { id: 'manual-group', name: 'assignee_group', size: 32, maxlength: 100, required: true });
  const note = h('textarea', { id: 'manual-note', name: 'note', rows: 3, maxlength: 2000, required: true });
  const alert = h('div', { class: 'alert', role: 'alert', tabindex: '-1' });
  const form = h('form', { id: 'manual-completion-form', class: 'replay-form', novalidate: true, 'aria-label': `Hand ${jobId} to a person` },
    h('h3', {}, 'Hand ', h('span', { class: 'mono' }, jobId), ' to a person'),
    h('p', { class: 'hint' }, 'A reviewer of the group writes the job’s result; the workflow’s rules check it before the job completes. ',
      manualLink('completing', 'completing a job by hand')),
    h('label', { for: group.id }, 'Reviewers’ group'), group,
    h('label', { for: note.id }, 'Note for them (recorded in the job’s events)'), note,
    h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary' }, 'Open the review')), alert);
  const fields = { assignee_group: group, note };
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    alert.textContent = '';
    try {
      const opened = await api(`v1/ops/jobs/${enc(jobId)}/manual-completion`, {
        method: 'POST', body: { assignee_group: group.value.trim(), note: note.value.trim() }, signal,
      });
      form.replaceChildren(h('p', { class: 'ok', role: 'status' },
        `Review ${opened.review_id} is open for ${opened.assignee_group}: a reviewer writes the job’s result.`));
      announce(`Job ${jobId} handed to ${opened.assignee_group}`);
      onOpened?.(opened);
    } catch (error) {
      if (error.name === 'AbortError') return;
      if (error.status === 422) showFieldErrors(error, fields, alert);
      else {
        alert.textContent = error.message;
        alert.focus();
      }
    }
  });
  setTimeout(() => group.focus());
  return form;
}

function replayForm(jobId, { fromStep, steps, signal, onStarted }) {
  const id = `replay-${jobId}`;
  const step = steps?.length
    ? h('select', { id: `${id}-step`, name: 'from_step' }, steps.map((s) => h('option', { value: s, selected: s === fromStep }, s)))
    : h('input', { id: `${id}-step`, name: 'from_step', value: fromStep || '' });
  const reason = h('input', { id: `${id}-reason`, name: 'reason', size: 48, minlength: 3, maxlength: 500, required: true });
  const alert = h('div', { class: 'alert', role: 'alert', tabindex: '-1' });
  const plan = h('div', { class: 'plan', 'aria-live': 'polite' });
  const showPlan = h('button', { type: 'submit' }, 'Show plan');
  const start = h('button', { type: 'button', class: 'primary', hidden: true }, 'Start replay');
  const form = h('form', { class: 'replay-form', novalidate: true, 'aria-label': `Replay ${jobId}` },
    h('h3', {}, 'Replay ', h('span', { class: 'mono' }, jobId)),
    h('label', { for: step.id }, 'From step'), step,
    h('label', { for: reason.id }, 'Reason (recorded in the job’s events)'), reason,
    h('div', { class: 'actions' }, showPlan, start), alert, plan);
  const fields = { from_step: step, reason };
  const body = (dryRun) => ({ from_step: step.value.trim(), reason: reason.value.trim(), ...(dryRun ? { dry_run: true } : {}) });
  let planned = null;
  const invalidate = () => { planned = null; start.hidden = true; plan.replaceChildren(); };
  step.addEventListener('change', invalidate);
  reason.addEventListener('input', () => { if (planned) start.hidden = false; });
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    alert.textContent = '';
    for (const input of Object.values(fields)) clearFieldError(input);
    showPlan.disabled = true;
    try {
      const outcome = await api(`v1/ops/jobs/${enc(jobId)}/replay`, { method: 'POST', body: body(true), signal });
      planned = outcome;
      const items = Array.isArray(outcome.rerun_items) ? outcome.rerun_items.length
        : Object.values(outcome.rerun_items || {}).reduce((n, list) => n + list.length, 0);
      const kept = Array.isArray(outcome.kept_items) ? outcome.kept_items.length
        : Object.values(outcome.kept_items || {}).reduce((n, list) => n + list.length, 0);
      plan.replaceChildren(
        h('p', {}, h('strong', {}, 'The plan: '), `attempt ${outcome.attempt} (execution ${outcome.execution}) runs from ${outcome.from_step}. Nothing has started yet.`),
        h('p', {}, 'Steps that run again: ', outcome.rerun_steps.length ? outcome.rerun_steps.join(' → ') : 'none'),
        h('p', {}, `Fan-out items that run again: ${items}; kept from their checkpoints: ${kept}.`),
        outcome.rerun_named?.length ? h('ul', {}, outcome.rerun_named.map((item) =>
          h('li', {}, `${item.step}: ${item.unit} ${item.item}${item.name ? ` “${item.name}”` : ''}`))) : '',
      );
      start.hidden = false;
      start.focus();
    } catch (error) {
      if (error.status === 422) {
        showFieldErrors(error, fields, alert);
        if (error.body?.allowed_steps) setFieldError(step, `one of: ${error.body.allowed_steps.join(', ')}`);
      } else {
        alert.textContent = error.message;
        alert.focus();
      }
    } finally {
      showPlan.disabled = false;
    }
  });
  start.addEventListener('click', async () => {
    start.disabled = true;
    alert.textContent = '';
    try {
      const outcome = await api(`v1/ops/jobs/${enc(jobId)}/replay`, { method: 'POST', body: body(false), signal });
      form.replaceChildren(h('p', { class: 'ok', role: 'status' }, `Replay started: ${outcome.execution} is ${outcome.status}, from ${outcome.from_step}. `,
        h('a', { href: `jobs/${enc(jobId)}`, 'data-nav': true }, 'Open the job')));
      onStarted?.(outcome);
    } catch (error) {
      start.disabled = false;
      if (error.status === 422) showFieldErrors(error, fields, alert);
      else {
        alert.textContent = error.message;
        alert.focus();
      }
    }
  });
  setTimeout(() => reason.focus());
  return form;
}

// Repair (an operator's): fix a stopped job's input (PATCH …/input, a merge patch of the fields that changed, then
// a replay from the first step the fix invalidated), escalate it to engineering or clear its escalation.
const FIXABLE = new Set(['failed', 'cancelled', 'expired']);

function escalationNote(escalation) {
  return h('div', { class: 'note escalation', id: 'escalation', role: 'status' },
    h('strong', {}, 'Escalated to engineering: '), escalation.note,
    escalation.link ? [' — ', h('a', { href: escalation.link, rel: 'noopener noreferrer', target: '_blank' }, escalation.link)] : '',
    ` (by ${escalation.by}, ${when(escalation.at)})`);
}

function repairActions({ getJob, after, signal, refresh, openReplay }) {
  const group = h('span', { class: 'repair-actions', role: 'group', 'aria-label': 'Repair' });
  const closeForms = () => after.parentElement?.querySelectorAll(':scope > .repair-form').forEach((form) => form.remove());
  const draw = () => {
    const job = getJob();
    group.replaceChildren();
    if (FIXABLE.has(job.status)) {
      const fix = h('button', { type: 'button', 'data-action': 'fix-input' }, 'Fix input…');
      fix.addEventListener('click', async () => {
        closeForms();
        fix.disabled = true;
        try {
          const current = await api(`v1/ops/jobs/${enc(job.job_id)}/input`, { signal });
          after.after(fixInputForm(job.job_id, current, { signal, close: () => { fix.disabled = false; }, openReplay }));
        } catch (error) {
          fix.disabled = false;
          group.append(problemBox(error));
        }
      });
      group.append(fix);
    }
    const escalate = h('button', { type: 'button', 'data-action': 'escalate' }, job.escalation ? 'Update escalation…' : 'Escalate…');
    escalate.addEventListener('click', () => {
      closeForms();
      after.after(escalateForm(job, { signal, done: async () => { await refresh(); draw(); } }));
    });
    group.append(escalate);
    if (job.escalation) {
      const clear = h('button', { type: 'button', 'data-action': 'clear-escalation' }, 'Clear escalation');
      clear.addEventListener('click', async () => {
        clear.disabled = true;
        try {
          await api(`v1/ops/jobs/${enc(job.job_id)}/escalate`, { method: 'DELETE', signal });
          announce(`Escalation of ${job.job_id} cleared`);
          await refresh();
          draw();
        } catch (error) {
          clear.disabled = false;
          group.append(problemBox(error));
        }
      });
      group.append(clear);
    }
  };
  draw();
  return group;
}

/** Only the members that changed, as a merge patch (RFC 7396): an object by member, `null` for one removed. */
function mergePatchOf(before, after) {
  const isObject = (value) => value !== null && typeof value === 'object' && !Array.isArray(value);
  if (!isObject(before) || !isObject(after)) return after;
  const patch = {};
  for (const name of new Set([...Object.keys(before), ...Object.keys(after)])) {
    if (!Object.hasOwn(after, name)) patch[name] = null;
    else if (JSON.stringify(before[name]) !== JSON.stringify(after[name])) patch[name] = mergePatchOf(before[name], after[name]);
  }
  return patch;
}

function fixInputForm(jobId, current, { signal, close, openReplay }) {
  const id = `fix-${jobId}`;
  const text = h('textarea', { id: `${id}-input`, name: 'input', rows: 14, cols: 80, spellcheck: 'false', class: 'mono' },
    JSON.stringify(current.input, null, 2));
  const reason = h('input', { id: `${id}-reason`, name: 'reason', size: 48, minlength: 3, maxlength: 500, required: true });
  const alert = h('div', { class: 'alert', role: 'alert', tabindex: '-1' });
  const errors = h('ul', { class: 'field-errors', id: `${id}-errors` });
  const save = h('button', { type: 'submit', class: 'primary' }, 'Save as a new version');
  const cancel = h('button', { type: 'button' }, 'Cancel');
  const form = h('form', { class: 'repair-form fix-input-form', novalidate: true, 'aria-label': `Fix the input of ${jobId}` },
    h('h3', {}, 'Fix the input of ', h('span', { class: 'mono' }, jobId), ` (version ${current.version})`),
    h('label', { for: text.id }, 'The input (JSON, as a request gives it; only what you change is sent, as a merge patch)'), text, errors,
    h('label', { for: reason.id }, 'Reason (recorded with your name in the input’s version and the job’s events)'), reason,
    h('div', { class: 'actions' }, save, cancel), alert);
  cancel.addEventListener('click', () => { form.remove(); close?.(); });
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    alert.textContent = '';
    errors.replaceChildren();
    clearFieldError(text);
    clearFieldError(reason);
    let edited;
    try {
      edited = JSON.parse(text.value);
    } catch (error) {
      setFieldError(text, `not JSON: ${error.message}`);
      text.focus();
      return;
    }
    const patch = mergePatchOf(current.input, edited);
    if (!Object.keys(patch).length) {
      setFieldError(text, 'nothing changed');
      text.focus();
      return;
    }
    save.disabled = true;
    try {
      const outcome = await api(`v1/ops/jobs/${enc(jobId)}/input`, { method: 'PATCH', body: { patch, reason: reason.value.trim() }, signal });
      const replay = h('button', { type: 'button', class: 'primary' }, `Replay from ${outcome.replay_from}…`);
      replay.addEventListener('click', () => { form.remove(); close?.(); openReplay(outcome.replay_from); });
      form.replaceChildren(h('div', { class: 'ok', role: 'status' },
        h('p', {}, `Input version ${outcome.input_version} saved; changed: ${outcome.changed.join(', ')}.`),
        h('ul', {}, outcome.diff.map((change) => h('li', { class: 'mono' }, `${change.path}: ${JSON.stringify(change.before)} → ${JSON.stringify(change.after)}`))),
        h('p', {}, `Checkpoints no longer valid: ${outcome.invalidated_steps.join(', ') || 'none'}.`),
        outcome.replay_from ? replay : ''));
      announce(`Input of ${jobId} fixed (version ${outcome.input_version})`);
    } catch (error) {
      save.disabled = false;
      if (error.status === 422 && error.body?.errors?.length) {
        // Each error at its place in the input: its path, then what is wrong there; the reason's beside the reason.
        for (const item of error.body.errors) {
          const loc = (item.loc || []).map(String);
          if (loc.at(-1) === 'reason') setFieldError(reason, item.msg);
          else errors.append(h('li', { class: 'field-error', 'data-loc': loc.join('.') }, h('span', { class: 'mono' }, loc.join('.')), `: ${item.msg}`));
        }
        if (errors.children.length) {
          text.setAttribute('aria-invalid', 'true');
          text.setAttribute('aria-describedby', errors.id);
        }
        alert.textContent = error.message;
        (errors.children.length ? text : reason).focus();
      } else {
        alert.textContent = error.message;
        alert.focus();
      }
    }
  });
  setTimeout(() => text.focus());
  return form;
}

function escalateForm(job, { signal, done }) {
  const id = `escalate-${job.job_id}`;
  const note = h('textarea', { id: `${id}-note`, name: 'note', rows: 3, cols: 60, minlength: 3, maxlength: 2000, required: true },
    job.escalation?.note || '');
  const link = h('input', { id: `${id}-link`, name: 'link', type: 'url', size: 48, maxlength: 2000, value: job.escalation?.link || '' });
  const alert = h('div', { class: 'alert', role: 'alert', tabindex: '-1' });
  const send = h('button', { type: 'submit', class: 'primary' }, job.escalation ? 'Update escalation' : 'Escalate');
  const cancel = h('button', { type: 'button' }, 'Cancel');
  const form = h('form', { class: 'repair-form escalate-form', novalidate: true, 'aria-label': `Escalate ${job.job_id}` },
    h('h3', {}, 'Escalate ', h('span', { class: 'mono' }, job.job_id), ' to engineering'),
    h('label', { for: note.id }, 'Note (what to look at; sent to the alarm topic)'), note,
    h('label', { for: link.id }, 'Link (a ticket or incident, optional)'), link,
    h('div', { class: 'actions' }, send, cancel), alert);
  cancel.addEventListener('click', () => form.remove());
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    alert.textContent = '';
    send.disabled = true;
    const body = { note: note.value.trim(), ...(link.value.trim() ? { link: link.value.trim() } : {}) };
    try {
      await api(`v1/ops/jobs/${enc(job.job_id)}/escalate`, { method: 'POST', body, signal });
      form.remove();
      announce(`Job ${job.job_id} escalated`);
      await done();
    } catch (error) {
      send.disabled = false;
      if (error.status === 422) showFieldErrors(error, { note, link }, alert);
      else {
        alert.textContent = error.message;
        alert.focus();
      }
    }
  });
  setTimeout(() => note.focus());
  return form;
}

async function deadLettersPage(main, _, { signal, query }) {
  const step = query.get('step') || '';
  const tenant = query.get('tenant') || '';
  main.append(h('h1', {}, 'Dead letters'));
  const letters = (await api(`v1/ops/dead-letters${qs({ step, tenant, limit: 500 })}`, { signal })).dead_letters;
  const stepInput = h('input', { id: 'filter-step', name: 'step', value: step, size: 18 });
  const tenantInput = h('input', { id: 'filter-tenant', name: 'tenant', value: tenant, size: 14 });
  const filters = h('form', { class: 'filters', role: 'search' },
    h('div', {}, h('label', { for: 'filter-step' }, 'Step'), stepInput),
    h('div', {}, h('label', { for: 'filter-tenant' }, 'Tenant'), tenantInput),
    h('button', { type: 'submit' }, 'Show'));
  filters.addEventListener('submit', (event) => {
    event.preventDefault();
    go(`ops/dead-letters${qs({ step: stepInput.value.trim(), tenant: tenantInput.value.trim() })}`);
  });
  main.append(filters);
  if (!letters.length) {
    main.append(h('p', {}, 'No dead letters: every failure has been replayed or none happened.'));
    return;
  }
  const bySteps = new Map();
  for (const letter of letters) {
    if (!bySteps.has(letter.step)) bySteps.set(letter.step, []);
    bySteps.get(letter.step).push(letter);
  }
  for (const [name, group] of bySteps) {
    const headingId = `step-${name.replace(/\W/g, '-')}`;
    main.append(h('h2', { id: headingId }, `${name} `, h('span', { class: 'hint' }, `(${group.length})`)),
      h('div', { class: 'table-wrap' }, h('table', { 'aria-labelledby': headingId },
        h('thead', {}, h('tr', {}, ['Job', 'Tenant', 'Item', 'Failure', 'Message', 'Attempts', 'Failed', ''].map((t) => h('th', { scope: 'col' }, t)))),
        h('tbody', {}, group.map((letter) => {
          const replay = h('button', { type: 'button' }, 'Replay');
          const row = h('tr', { 'data-job': letter.job_id },
            h('td', {}, h('a', { href: `jobs/${enc(letter.job_id)}`, 'data-nav': true, class: 'mono' }, letter.job_id)),
            h('td', {}, letter.tenant_id ?? '—'),
            h('td', {}, letter.item === null || letter.item === undefined ? '—' : `#${letter.item}${letter.item_name ? ` ${letter.item_name}` : ''}`),
            h('td', {}, `${letter.kind} (${letter.error})`),
            h('td', {}, letter.message),
            h('td', { class: 'num' }, String(letter.attempts)),
            h('td', { title: when(letter.failed_at) }, `${age(letter.failed_at)} ago`),
            h('td', {}, replay));
          replay.addEventListener('click', () => {
            replay.disabled = true;
            const cell = h('td', { colspan: 8 }, replayForm(letter.job_id, { fromStep: letter.step, signal }));
            row.after(h('tr', {}, cell));
          });
          return row;
        })))));
  }
}

async function webhooksPage(main, _, { signal }) {
  main.append(h('h1', {}, 'Dead webhooks'));
  const { webhooks } = await api('v1/ops/webhooks/dead-letters?limit=500', { signal });
  if (!webhooks.length) {
    main.append(h('p', {}, 'No dead webhooks: every delivery succeeded or is still being retried.'));
    return;
  }
  main.append(h('div', { class: 'table-wrap' }, h('table', { 'aria-label': 'Dead webhooks' },
    h('thead', {}, h('tr', {}, ['Webhook', 'Job', 'Tenant', 'Event', 'Attempts', 'Last error', 'Last attempt', 'Status', ''].map((t) => h('th', { scope: 'col' }, t)))),
    h('tbody', {}, webhooks.map((webhook) => {
      const status = h('td', {}, badge(webhook.status));
      const redeliver = h('button', { type: 'button' }, 'Redeliver');
      const message = h('div', { role: 'status' });
      redeliver.addEventListener('click', async () => {
        redeliver.disabled = true;
        try {
          const fresh = await api(`v1/ops/webhooks/${enc(webhook.webhook_id)}/redeliver`, { method: 'POST', signal });
          status.replaceChildren(badge(fresh.status));
          message.textContent = 'Redelivery started: same webhook-id and body, a new series of retries.';
        } catch (error) {
          redeliver.disabled = false;
          message.replaceChildren(problemBox(error));
        }
      });
      return h('tr', { 'data-webhook': webhook.webhook_id },
        h('td', { class: 'mono' }, webhook.webhook_id),
        h('td', {}, h('a', { href: `jobs/${enc(webhook.job_id)}`, 'data-nav': true, class: 'mono' }, webhook.job_id)),
        h('td', {}, webhook.tenant_id), h('td', {}, webhook.event), h('td', { class: 'num' }, String(webhook.attempts)),
        h('td', {}, webhook.last_error ?? '—'), h('td', {}, when(webhook.last_attempt_at)), status,
        h('td', {}, redeliver, message));
    })))));
}

const POLICY_FIELDS = [
  { name: 'max_job_tokens', label: 'Tokens per job (ceiling)', type: 'number', min: 1 },
  { name: 'max_job_cost_usd', label: 'Dollars per job (ceiling)', type: 'text', inputmode: 'decimal' },
  { name: 'daily_tokens', label: 'Tokens per UTC day', type: 'number', min: 1 },
  { name: 'daily_cost_usd', label: 'Dollars per UTC day', type: 'text', inputmode: 'decimal' },
  { name: 'submissions_per_minute', label: 'Submissions per minute', type: 'number', min: 1 },
  { name: 'jobs_in_flight', label: 'Jobs in flight', type: 'number', min: 1 },
  { name: 'weight', label: 'Weight (1–100)', type: 'number', min: 1, max: 100 },
  { name: 'max_schedules', label: 'Schedules it may keep', type: 'number', min: 0 },
  { name: 'min_schedule_interval_seconds', label: 'Shortest interval between fires (s)', type: 'number', min: 60 },
  { name: 'max_triggers', label: 'Triggers it may keep', type: 'number', min: 0 },
  { name: 'routes', label: 'Model routes (comma-separated; empty: every route)', type: 'text' },
];
const SLA_CLASSES = ['interactive', 'standard', 'batch'];

async function policiesPage(main, _, { signal, query }) {
  const tenant = query.get('tenant') || '';
  main.append(h('h1', {}, 'Tenant policies'));
  const tenantInput = h('input', { id: 'policy-tenant', name: 'tenant', value: tenant, size: 20, required: true });
  const pick = h('form', { class: 'filters', role: 'search' },
    h('div', {}, h('label', { for: 'policy-tenant' }, 'Tenant'), tenantInput), h('button', { type: 'submit' }, 'Open'));
  pick.addEventListener('submit', (event) => {
    event.preventDefault();
    if (tenantInput.value.trim()) go(`ops/policies${qs({ tenant: tenantInput.value.trim() })}`);
  });
  main.append(pick);
  if (!tenant) {
    main.append(h('p', { class: 'hint' }, 'Name a tenant to read and edit its budgets and admission quotas.'));
    return;
  }
  const view = await api(`v1/ops/tenants/${enc(tenant)}/policy`, { signal });
  const today = view.today;
  main.append(
    h('h2', {}, `${view.tenant_id} `, badge(view.source === 'stored' ? 'completed' : 'queued', view.source === 'stored' ? 'its own policy' : 'the defaults')),
    facts([
      ['Today (UTC)', today.day],
      ['Held today', `${int(today.tokens)} tokens, ${usd(today.cost_usd)}`],
      ['Remaining today', `${int(today.remaining_tokens)} tokens, ${usd(today.remaining_cost_usd)}`],
    ]),
  );
  const inputs = {};
  const policy = view.policy;
  const grid = h('div', { class: 'policy-form' }, POLICY_FIELDS.map((f) => {
    const value = f.name === 'routes' ? (policy.routes || []).join(', ') : policy[f.name];
    inputs[f.name] = h('input', { id: `policy-${f.name}`, name: f.name, type: f.type, min: f.min, max: f.max, inputmode: f.inputmode, value: value ?? '' });
    return h('div', {}, h('label', { for: `policy-${f.name}` }, f.label), inputs[f.name]);
  }));
  const classes = SLA_CLASSES.map((c) => h('input', { type: 'checkbox', id: `policy-sla-${c}`, value: c, checked: policy.sla_classes.includes(c) }));
  const slaGroup = h('fieldset', { id: 'policy-sla_classes', tabindex: '-1' }, h('legend', {}, 'SLA classes its jobs may use'),
    classes.map((box) => h('div', {}, box, h('label', { for: box.id, class: 'inline' }, ` ${box.value}`))));
  const alert = h('div', { class: 'alert', role: 'alert', tabindex: '-1' });
  const saved = h('div', { role: 'status' });
  const form = h('form', { novalidate: true, 'aria-label': `Policy of ${view.tenant_id}` }, grid, slaGroup,
    h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary' }, 'Save policy')), alert, saved);
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    saved.textContent = '';
    alert.textContent = '';
    const body = {};
    for (const f of POLICY_FIELDS) {
      const raw = inputs[f.name].value.trim();
      if (f.name === 'routes') body.routes = raw ? raw.split(',').map((r) => r.trim()).filter(Boolean) : null;
      else if (raw === '') continue;
      else body[f.name] = f.type === 'number' && /^-?\d+$/.test(raw) ? Number(raw) : raw;
    }
    body.sla_classes = classes.filter((box) => box.checked).map((box) => box.value);
    try {
      const stored = await api(`v1/ops/tenants/${enc(tenant)}/policy`, { method: 'PUT', body, signal });
      for (const input of [...Object.values(inputs), slaGroup]) clearFieldError(input);
      saved.replaceChildren(h('p', { class: 'ok' }, `Saved the policy of ${stored.tenant_id}.`));
    } catch (error) {
      if (error.status === 422) showFieldErrors(error, { ...inputs, sla_classes: slaGroup }, alert);
      else {
        alert.textContent = error.message;
        alert.focus();
      }
    }
  });
  main.append(form);
}

// ------------------------------------------------------------------------------------------------ schedules and triggers

/** What started a job no caller submitted: a schedule's fire, an S3 inbox's object (or window), a matching event. */
function triggerText(trigger) {
  if (trigger.type === 'schedule') return `schedule ${trigger.id}, due ${when(trigger.scheduled_at)}`;
  if (trigger.type === 's3') {
    return trigger.objects ? `S3 trigger ${trigger.id}, a window of ${int(trigger.objects)} objects` : `S3 trigger ${trigger.id}: ${trigger.key}`;
  }
  return `EventBridge trigger ${trigger.id}, event ${trigger.event_id || '—'}`;
}

function jsonOf(input) {
  try {
    return JSON.parse(input.value || '{}');
  } catch (error) {
    setFieldError(input, `not JSON: ${error.message}`);
    throw error;
  }
}

/** The actions of a schedule's or trigger's row: pause or resume it, delete it; `reload` redraws the page. */
function recordActions(path, record, { signal, reload, name }) {
  const message = h('div', { role: 'status' });
  const toggle = h('button', { type: 'button' }, record.enabled ? 'Pause' : 'Resume');
  toggle.addEventListener('click', async () => {
    toggle.disabled = true;
    try {
      await api(path, { method: 'PATCH', body: { enabled: !record.enabled }, signal });
      reload();
    } catch (error) {
      toggle.disabled = false;
      message.replaceChildren(problemBox(error));
    }
  });
  const remove = h('button', { type: 'button', class: 'danger' }, 'Delete');
  remove.addEventListener('click', async () => {
    if (!window.confirm(`Delete ${name}? The jobs it started are kept.`)) return;
    remove.disabled = true;
    try {
      await api(path, { method: 'DELETE', signal });
      reload();
    } catch (error) {
      remove.disabled = false;
      message.replaceChildren(problemBox(error));
    }
  });
  return h('td', {}, toggle, ' ', remove, message);
}

function lastJob(record) {
  if (record.last_job_id) return h('a', { href: `jobs/${enc(record.last_job_id)}`, 'data-nav': true, class: 'mono' }, record.last_job_id);
  return record.last_error ? h('span', { class: 'field-error' }, record.last_error) : '—';
}

async function triggersPage(main, _, { signal }) {
  const reload = () => go('triggers', { replace: true });
  main.append(h('h1', {}, 'Schedules & triggers'));
  const [{ schedules }, { triggers }] = await Promise.all([
    api('v1/schedules', { signal }), api('v1/triggers', { signal })]);

  const scheduleSection = section('Schedules', 'schedules-title');
  scheduleSection.append(schedules.length
    ? h('div', { class: 'table-wrap' }, h('table', { 'aria-label': 'Schedules' },
      h('thead', {}, h('tr', {}, ['Schedule', 'Workflow', 'When', 'State', 'Next run', 'Last job', ''].map((t) => h('th', { scope: 'col' }, t)))),
      h('tbody', {}, schedules.map((s) => h('tr', { 'data-schedule': s.schedule_id },
        h('td', { class: 'mono' }, s.schedule_id), h('td', {}, s.workflow), h('td', { class: 'mono' }, `${s.schedule} (${s.timezone})`),
        h('td', {}, badge(s.enabled ? 'running' : 'paused', s.enabled ? 'enabled' : 'paused')), h('td', {}, when(s.next_run_at)),
        h('td', {}, lastJob(s)),
        recordActions(`v1/schedules/${enc(s.schedule_id)}`, s, { signal, reload, name: s.schedule_id }))))))
    : h('p', {}, 'No schedules yet.'));
  scheduleSection.append(scheduleForm({ signal, reload }));

  const triggerSection = section('Triggers', 'triggers-title');
  triggerSection.append(triggers.length
    ? h('div', { class: 'table-wrap' }, h('table', { 'aria-label': 'Triggers' },
      h('thead', {}, h('tr', {}, ['Trigger', 'Type', 'Workflow', 'From', 'State', 'Last job', ''].map((t) => h('th', { scope: 'col' }, t)))),
      h('tbody', {}, triggers.map((t) => h('tr', { 'data-trigger': t.trigger_id },
        h('td', { class: 'mono' }, t.trigger_id), h('td', {}, t.type), h('td', {}, t.workflow),
        h('td', { class: 'mono' }, t.type === 's3' ? `${t.inbox}${t.batch_seconds ? ` (windows of ${t.batch_seconds} s)` : ''}` : `bus ${t.event_bus}`),
        h('td', {}, badge(t.enabled ? 'running' : 'paused', t.enabled ? 'enabled' : 'paused')), h('td', {}, lastJob(t)),
        recordActions(`v1/triggers/${enc(t.trigger_id)}`, t, { signal, reload, name: t.trigger_id }))))))
    : h('p', {}, 'No triggers yet.'));
  triggerSection.append(triggerForm({ signal, reload }));
  main.append(scheduleSection, triggerSection);
}

function field(id, label, input) {
  return h('div', {}, h('label', { for: id }, label), input);
}

function scheduleForm({ signal, reload }) {
  const inputs = {
    workflow: h('input', { id: 'schedule-workflow', value: 'document-analysis', required: true }),
    schedule: h('input', { id: 'schedule-schedule', value: 'cron(0 2 * * ? *)', required: true, class: 'mono' }),
    timezone: h('input', { id: 'schedule-timezone', value: 'UTC' }),
    sla_class: h('select', { id: 'schedule-sla_class' }, SLA_CLASSES.map((c) => h('option', { value: c, selected: c === 'batch' ? true : null }, c))),
    input: h('textarea', { id: 'schedule-input', rows: 6, class: 'mono', placeholder: '{"question": "…", "documents": [{"name": "…", "text": "…"}]}' }),
  };
  const alert = h('div', { class: 'alert', role: 'alert', tabindex: '-1' });
  const form = h('form', { novalidate: true, 'aria-label': 'New schedule', class: 'policy-form' },
    field('schedule-workflow', 'Workflow', inputs.workflow), field('schedule-schedule', 'cron(…) or rate(…)', inputs.schedule),
    field('schedule-timezone', 'Time zone', inputs.timezone), field('schedule-sla_class', 'SLA class', inputs.sla_class),
    field('schedule-input', "The job's input (JSON)", inputs.input),
    h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary' }, 'Create schedule')), alert);
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    alert.textContent = '';
    for (const input of Object.values(inputs)) clearFieldError(input);
    try {
      const body = { workflow: inputs.workflow.value.trim(), schedule: inputs.schedule.value.trim(), timezone: inputs.timezone.value.trim() || 'UTC',
        sla_class: inputs.sla_class.value, input: jsonOf(inputs.input) };
      await api('v1/schedules', { method: 'POST', body, signal });
      reload();
    } catch (error) {
      if (error instanceof Problem && error.status === 422) showFieldErrors(error, inputs, alert);
      else if (error instanceof Problem) alert.replaceChildren(problemBox(error));
    }
  });
  return h('details', {}, h('summary', {}, 'New schedule'), form);
}

function triggerForm({ signal, reload }) {
  const inputs = {
    type: h('select', { id: 'trigger-type' }, ['s3', 'eventbridge'].map((t) => h('option', { value: t }, t))),
    workflow: h('input', { id: 'trigger-workflow', value: 'document-analysis', required: true }),
    input_template: h('textarea', { id: 'trigger-input_template', rows: 4, class: 'mono', placeholder: '{"question": {"$event": "detail.question"}}' }),
    event_pattern: h('textarea', { id: 'trigger-event_pattern', rows: 3, class: 'mono', placeholder: '{"source": ["acme.orders"]}' }),
    prefix: h('input', { id: 'trigger-prefix', placeholder: 'reports/' }),
    batch_seconds: h('input', { id: 'trigger-batch_seconds', type: 'number', min: 1, max: 3600 }),
  };
  const alert = h('div', { class: 'alert', role: 'alert', tabindex: '-1' });
  const form = h('form', { novalidate: true, 'aria-label': 'New trigger', class: 'policy-form' },
    field('trigger-type', 'Type', inputs.type), field('trigger-workflow', 'Workflow', inputs.workflow),
    field('trigger-input_template', 'Input template (JSON; {"$event": "path"} takes a field of the event)', inputs.input_template),
    field('trigger-event_pattern', 'EventBridge: event pattern (JSON)', inputs.event_pattern),
    field('trigger-prefix', 'S3: only under this folder of the inbox', inputs.prefix),
    field('trigger-batch_seconds', 'S3: one job per window of (seconds)', inputs.batch_seconds),
    h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary' }, 'Create trigger')), alert);
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    alert.textContent = '';
    for (const input of Object.values(inputs)) clearFieldError(input);
    try {
      const body = { type: inputs.type.value, workflow: inputs.workflow.value.trim(), input_template: jsonOf(inputs.input_template) };
      if (body.type === 'eventbridge') body.event_pattern = jsonOf(inputs.event_pattern);
      else {
        if (inputs.prefix.value.trim()) body.prefix = inputs.prefix.value.trim();
        if (inputs.batch_seconds.value.trim()) body.batch_seconds = Number(inputs.batch_seconds.value);
      }
      await api('v1/triggers', { method: 'POST', body, signal });
      reload();
    } catch (error) {
      if (error instanceof Problem && error.status === 422) showFieldErrors(error, inputs, alert);
      else if (error instanceof Problem) alert.replaceChildren(problemBox(error));
    }
  });
  return h('details', {}, h('summary', {}, 'New trigger'), form);
}

render();

// ------------------------------------------------------------------------------------------------ usage report

const SVG_NS = 'http://www.w3.org/2000/svg';

function svgEl(tag, attrs = {}, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [name, value] of Object.entries(attrs)) el.setAttribute(name, String(value));
  el.append(...children);
  return el;
}

/** A horizontal bar per group: its dollars, and the part of them retries cost (no script or style from elsewhere). */
function spendChart(rows, label) {
  const width = 640;
  const bar = 22;
  const left = 190;
  const scale = Math.max(...rows.map((r) => Number(r.usd)), 1e-9);
  const chart = svgEl('svg', {
    class: 'spend-chart', role: 'img', viewBox: `0 0 ${width} ${rows.length * (bar + 8) + 8}`,
    'aria-label': `Spend by ${label}: ${rows.map((r) => `${r.key} $${r.usd}`).join(', ')}`,
  });
  rows.forEach((row, n) => {
    const y = 8 + n * (bar + 8);
    const full = ((width - left - 90) * Number(row.usd)) / scale;
    const retry = ((width - left - 90) * Number(row.retry_usd)) / scale;
    chart.append(
      svgEl('text', { x: left - 8, y: y + bar * 0.7, 'text-anchor': 'end', class: 'chart-label' }, row.key),
      svgEl('rect', { x: left, y, width: Math.max(full, 1), height: bar, class: 'chart-bar' }),
      svgEl('rect', { x: left, y, width: retry, height: bar, class: 'chart-retry' }),
      svgEl('text', { x: left + Math.max(full, 1) + 6, y: y + bar * 0.7, class: 'chart-value' }, `$${row.usd}`),
    );
  });
  return chart;
}

function reportTable(caption, heads, rows) {
  const id = `report-${caption.toLowerCase().replace(/\W+/g, '-')}`;
  return [h('h2', { id }, caption), h('div', { class: 'table-wrap' }, h('table', { 'aria-labelledby': id },
    h('thead', {}, h('tr', {}, heads.map(([t, num]) => h('th', { scope: 'col', class: num ? 'num' : null }, t)))),
    h('tbody', {}, rows.map((cells) => h('tr', {}, cells.map((c, i) => h('td', { class: heads[i][1] ? 'num' : null }, String(c)))))))),
  ];
}

async function reportsPage(main, _, { signal, query }) {
  const since = query.get('since') || '7d';
  const tenant = query.get('tenant') || '';
  const by = query.get('by') || 'workflow';
  main.append(h('h1', {}, 'Usage report'));
  const sinceInput = h('input', { id: 'report-since', name: 'since', value: since, size: 8 });
  const tenantInput = h('input', { id: 'report-tenant', name: 'tenant', value: tenant, size: 14 });
  const bySelect = h('select', { id: 'report-by', name: 'by' },
    ['workflow', 'route', 'step', 'version'].map((v) => h('option', { value: v, selected: v === by ? true : null }, v)));
  const filters = h('form', { class: 'filters', role: 'search' },
    h('div', {}, h('label', { for: 'report-since' }, 'Since'), sinceInput),
    h('div', {}, h('label', { for: 'report-tenant' }, 'Tenant'), tenantInput),
    h('div', {}, h('label', { for: 'report-by' }, 'Spend by'), bySelect),
    h('button', { type: 'submit' }, 'Show'));
  filters.addEventListener('submit', (event) => {
    event.preventDefault();
    go(`ops/reports${qs({ since: sinceInput.value.trim(), tenant: tenantInput.value.trim(), by: bySelect.value })}`);
  });
  main.append(filters);
  const report = await api(`v1/ops/reports${qs({ since, tenant_id: tenant, by })}`, { signal });
  const waits = (p) => (p ? `p50 ${duration(p.p50)}, p95 ${duration(p.p95)}` : '—');
  main.append(facts([
    ['Jobs', String(report.jobs)],
    ['Spend', `$${report.total_usd} (model $${report.model_usd})`],
    ['Retries', `$${report.retry_usd}, ${report.retry_tokens} tokens not kept`],
    ['Review waits', `${report.review_waits} (${waits(report.review_wait_seconds)})`],
    ['Queue wait', waits(report.queue_wait_seconds)],
  ], { row: true }));
  if (!report.jobs) {
    main.append(h('p', {}, 'No job created in this window has been exported yet (the export runs every few minutes).'));
    return;
  }
  main.append(h('h2', {}, `Spend by ${by}`), h('p', { class: 'hint' }, 'The darker part of a bar is what retries cost.'),
    spendChart(report.spend, by));
  main.append(...reportTable(`Spend by ${by} (table)`,
    [[by], ['Jobs', 1], ['Completed', 1], ['Failed', 1], ['Tokens in', 1], ['Tokens out', 1], ['USD', 1], ['Retry USD', 1]],
    report.spend.map((r) => [r.key, r.jobs, r.completed, r.failed, r.input_tokens, r.output_tokens, r.usd, r.retry_usd])));
  main.append(...reportTable('Step durations',
    [['Workflow'], ['Step'], ['Runs', 1], ['Attempts', 1], ['p50', 1], ['p95', 1]],
    report.steps.map((s) => [s.workflow, s.step, s.runs, s.attempts, `${s.seconds.p50.toFixed(2)} s`, `${s.seconds.p95.toFixed(2)} s`])));
  if (report.failures.length) {
    main.append(...reportTable('Failure kinds', [['Workflow'], ['Step'], ['Kind'], ['Count', 1]],
      report.failures.map((f) => [f.workflow, f.step, f.kind, f.count])));
  }
}

// ------------------------------------------------------------------------------------------------ filters, terminate, bulk

// The job listings' filters beyond status and tenant: their inputs, what the page's query gives, and what they hold.
function listFilters(query) {
  const given = {};
  for (const name of ['workflow', 'sla_class', 'created_since', 'created_until', 'q']) {
    const value = query.get(name);
    if (value) given[name] = value;
  }
  const search = h('input', { id: 'filter-q', name: 'q', type: 'search', value: given.q || '', size: 22, placeholder: 'job id or words of the question' });
  const workflow = h('input', { id: 'filter-workflow', name: 'workflow', value: given.workflow || '', size: 18 });
  const sla = h('select', { id: 'filter-sla', name: 'sla_class' },
    h('option', { value: '' }, 'Any class'),
    ['interactive', 'standard', 'batch'].map((c) => h('option', { value: c, selected: c === given.sla_class }, c)));
  const local = (iso) => (iso ? iso.slice(0, 16) : '');
  const since = h('input', { id: 'filter-since', name: 'created_since', type: 'datetime-local', value: local(given.created_since) });
  const until = h('input', { id: 'filter-until', name: 'created_until', type: 'datetime-local', value: local(given.created_until) });
  const utc = (input) => (input.value ? `${input.value}:00Z` : '');
  const fields = [
    h('div', {}, h('label', { for: search.id }, 'Find'), search),
    h('div', {}, h('label', { for: workflow.id }, 'Workflow'), workflow),
    h('div', {}, h('label', { for: sla.id }, 'SLA class'), sla),
    h('div', {}, h('label', { for: since.id }, 'Created since (UTC)'), since),
    h('div', {}, h('label', { for: until.id }, 'until (UTC)'), until),
  ];
  const values = () => ({
    q: search.value.trim(), workflow: workflow.value.trim(), sla_class: sla.value, created_since: utc(since), created_until: utc(until),
  });
  return { given, fields, values };
}

// An operator ends a job for good: how it ends, why (in the job's events), and what its owner reads.
function terminateForm(job, { signal, onDone }) {
  const id = 'terminate-form';
  const status = h('select', { id: `${id}-status`, name: 'status' },
    ['failed', 'cancelled'].map((s) => h('option', { value: s, selected: s === (job.status === 'failed' ? 'failed' : 'cancelled') }, s)));
  const reason = h('input', { id: `${id}-reason`, name: 'reason', size: 48, minlength: 3, maxlength: 500, required: true });
  const message = h('textarea', { id: `${id}-message`, name: 'message', rows: 3, cols: 60, maxlength: 1000, required: true });
  const alert = h('div', { class: 'alert', role: 'alert', tabindex: '-1' });
  const submit = h('button', { type: 'submit', class: 'danger' }, 'Terminate the job');
  const form = h('form', { id, class: 'replay-form', novalidate: true, 'aria-label': `Terminate ${job.job_id}` },
    h('h3', {}, 'Terminate ', h('span', { class: 'mono' }, job.job_id)),
    h('label', { for: status.id }, 'Ends as'), status,
    h('label', { for: reason.id }, 'Reason (recorded in the job’s events, with you)'), reason,
    h('label', { for: message.id }, 'Message its owner reads (at most 1,000 characters)'), message,
    h('div', { class: 'actions' }, submit), alert);
  const fields = { status, reason, message };
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    alert.textContent = '';
    for (const input of Object.values(fields)) clearFieldError(input);
    submit.disabled = true;
    try {
      const body = { status: status.value, reason: reason.value.trim(), message: message.value.trim() };
      const outcome = await api(`v1/ops/jobs/${enc(job.job_id)}/terminate`, { method: 'POST', body, signal });
      announce(`Job ${outcome.job_id} terminated: ${outcome.status}`);
      onDone?.(outcome);
    } catch (error) {
      submit.disabled = false;
      if (error.status === 422) showFieldErrors(error, fields, alert);
      else {
        alert.textContent = error.message;
        alert.focus();
      }
    }
  });
  setTimeout(() => reason.focus());
  return form;
}

// The operator's bulk actions over their job list: a filter, a dry run that lists the jobs and what each would get,
// then the same request executed under one Idempotency-Key (a second click answers the same, acting on no job twice).
function bulkPanel(initial, { signal }) {
  const id = 'bulk';
  const field = (name, label, attrs = {}) => {
    const input = h('input', { id: `${id}-${name}`, name, size: 16, ...attrs });
    return [input, h('div', {}, h('label', { for: input.id }, label), input)];
  };
  const action = h('select', { id: `${id}-action`, name: 'action' },
    h('option', { value: 'replay' }, 'Replay'), h('option', { value: 'terminate' }, 'Terminate'));
  const [workflow, workflowBox] = field('workflow', 'Workflow', { value: initial.workflow || '' });
  const [tenant, tenantBox] = field('tenant_id', 'Tenant', { value: initial.tenant || '' });
  const [status, statusBox] = field('status', 'Status', { value: initial.status || '', placeholder: 'failed' });
  const [step, stepBox] = field('failed_step', 'Failed at step');
  const [kind, kindBox] = field('error_kind', 'Error kind', { placeholder: 'invalid-input' });
  const [since, sinceBox] = field('since', 'Changed since (UTC)', { type: 'datetime-local' });
  const escalated = h('input', { id: `${id}-escalated`, type: 'checkbox' });
  const endAs = h('select', { id: `${id}-end-as`, name: 'end_as' },
    h('option', { value: 'cancelled' }, 'cancelled'), h('option', { value: 'failed' }, 'failed'));
  const message = h('input', { id: `${id}-message`, name: 'message', size: 40, maxlength: 1000 });
  const reason = h('input', { id: `${id}-reason`, name: 'reason', size: 30, maxlength: 500 });
  const ending = h('div', { hidden: true },
    h('div', {}, h('label', { for: endAs.id }, 'Ends as'), endAs),
    h('div', {}, h('label', { for: message.id }, 'Message each owner reads'), message));
  const alert = h('div', { class: 'alert', role: 'alert', tabindex: '-1' });
  const result = h('div', { id: `${id}-result`, 'aria-live': 'polite' });
  const dry = h('button', { type: 'submit' }, 'Dry run');
  const execute = h('button', { type: 'button', class: 'danger', hidden: true }, 'Execute');
  action.addEventListener('change', () => { ending.hidden = action.value !== 'terminate'; execute.hidden = true; result.replaceChildren(); });
  const request = (dryRun) => {
    const filter = {};
    for (const [name, input] of [['workflow', workflow], ['tenant_id', tenant], ['failed_step', step], ['error_kind', kind]]) {
      if (input.value.trim()) filter[name] = input.value.trim();
    }
    const statuses = status.value.split(',').map((v) => v.trim()).filter(Boolean);
    if (statuses.length) filter.status = statuses;
    if (since.value) filter.since = `${since.value}:00Z`;
    if (escalated.checked) filter.escalated = true;
    const body = { filter, dry_run: dryRun, ...(reason.value.trim() ? { reason: reason.value.trim() } : {}) };
    if (action.value === 'terminate') Object.assign(body, { status: endAs.value, message: message.value.trim() });
    return body;
  };
  let key = null;
  const show = (outcome) => {
    const rows = outcome.jobs.map((job) => h('tr', {},
      h('td', {}, h('a', { href: `jobs/${enc(job.job_id)}`, 'data-nav': true, class: 'mono' }, job.job_id)),
      h('td', {}, job.tenant_id), h('td', {}, job.workflow), h('td', {}, badge(job.status)),
      h('td', {}, job.error_kind ? `${job.error_kind} at ${job.failed_step ?? '—'}` : '—'),
      h('td', { 'data-outcome': job.outcome }, job.outcome.replaceAll('_', ' ')),
      h('td', {}, job.plan ? `from ${job.plan.from_step}` : job.terminated ? `ends ${job.terminated.status}` : (job.problem || ''))));
    const counts = Object.entries(outcome.counts).map(([what, n]) => `${n} ${what.replaceAll('_', ' ')}`).join(', ');
    result.replaceChildren(
      h('p', {}, h('strong', {}, outcome.dry_run ? 'Dry run: ' : 'Done: '), `${outcome.matched} job(s)`, counts ? ` — ${counts}` : '',
        outcome.more ? ' (more matched than the limit)' : '', outcome.dry_run ? '. Nothing was changed.' : '.'),
      outcome.jobs.length ? h('div', { class: 'table-wrap' }, h('table', {},
        h('thead', {}, h('tr', {}, ['Job', 'Tenant', 'Workflow', 'Status', 'Error', 'Outcome', 'Detail'].map((t) => h('th', { scope: 'col' }, t)))),
        h('tbody', {}, rows))) : '');
  };
  const send = async (dryRun) => {
    alert.textContent = '';
    const path = action.value === 'replay' ? 'v1/ops/jobs:replay' : 'v1/ops/jobs:terminate';
    const headers = dryRun ? {} : { 'Idempotency-Key': key };
    return api(path, { method: 'POST', body: request(dryRun), signal, headers });
  };
  const form = h('form', { class: 'filters bulk', id: `${id}-form`, 'aria-label': 'Bulk actions' },
    h('div', {}, h('label', { for: action.id }, 'Action'), action),
    workflowBox, tenantBox, statusBox, stepBox, kindBox, sinceBox,
    h('div', {}, escalated, h('label', { for: escalated.id, class: 'inline' }, ' Escalated only')),
    h('div', {}, h('label', { for: reason.id }, 'Reason'), reason),
    ending, h('div', { class: 'actions' }, dry, execute));
  form.addEventListener('input', () => { execute.hidden = true; });
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    dry.disabled = true;
    try {
      const outcome = await send(true);
      show(outcome);
      key = `console-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 10)}`;
      execute.hidden = outcome.matched === 0;
      execute.textContent = `Execute on ${outcome.matched} job(s)`;
    } catch (error) {
      alert.textContent = error.message;
      alert.focus();
    } finally {
      dry.disabled = false;
    }
  });
  execute.addEventListener('click', async () => {
    execute.disabled = true;
    try {
      show(await send(false));
      execute.hidden = true;
    } catch (error) {
      alert.textContent = error.message;
      alert.focus();
    } finally {
      execute.disabled = false;
    }
  });
  return h('details', { class: 'bulk-panel', id: `${id}-panel` }, h('summary', {}, 'Bulk actions'), form, alert, result);
}
