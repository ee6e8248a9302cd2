// svcgw dashboard: plain JavaScript, no build step. uPlot (vendored) draws
// the chart; everything else is here. The API key lives in sessionStorage
// only and travels only in the Authorization header of same-origin calls.
(() => {
  'use strict';

  const KEY_STORAGE = 'svcgw.key';
  const REVIEW_END_USER = 'svcgw:dashboard'; // store.ReviewEndUser
  const API = '/svc/v1';
  const PAGE_SIZE = 25;
  const MAX_SERIES = 7; // stacked series shown; the rest are summed as "other"
  const DAY_MS = 86400000;

  const { $, cssVar, el, fmtAxisUSD, setText, showBanner, utcToday } = window.svcgwPage; // common.js

  const state = {
    key: null,
    credits: null,
    usage: null,
    list: null,
    metric: 'cost', // or 'requests'
    group: '', // '', request_type, application, api_key
    range: '30', // '7', '30', '90' or 'custom'
    start: '', // YYYY-MM-DD, for 'custom'
    end: '',
    cursors: [''], // the before= of each page shown so far; '' is the first
    filterType: '',
    filterApp: '',
    chart: null,
    series: null, // what the chart shows: {days, xs, series: [{label, color, values}]}
    seq: { usage: 0, calls: 0 },
    detail: null,
    rating: '',
  };

  // ---- the API ----

  class APIError extends Error {
    constructor(kind, message, status) {
      super(message);
      this.kind = kind; // 'network', 'auth', 'server' or 'request'
      this.status = status || 0;
    }
  }

  async function api(path, init) {
    const headers = { Authorization: 'Bearer ' + state.key, Accept: 'application/json' };
    if (init && init.body) headers['Content-Type'] = 'application/json';
    let res;
    try {
      res = await fetch(API + path, Object.assign({}, init, {
        headers, cache: 'no-store', credentials: 'omit', referrerPolicy: 'no-referrer',
      }));
    } catch (_) {
      throw new APIError('network', 'Cannot reach the gateway at ' + location.host + '. Check that svcgw is running and the network is up.');
    }
    let body = null;
    try { body = await res.json(); } catch (_) { /* not JSON */ }
    if (res.ok && body) return body;
    const message = (body && body.error && body.error.message) || 'The gateway answered HTTP ' + res.status + '.';
    if (res.status === 401) throw new APIError('auth', message, 401);
    if (res.status >= 500 || !body) throw new APIError('server', message, res.status);
    throw new APIError('request', message, res.status);
  }

  function usageQuery() {
    const { start, end } = currentRange();
    const q = new URLSearchParams({
      group_by: state.group ? 'day,' + state.group : 'day',
      start_date: start,
      end_date: end,
    });
    return '/usage?' + q;
  }

  function callsQuery() {
    const q = new URLSearchParams({ limit: String(PAGE_SIZE) });
    const before = state.cursors[state.cursors.length - 1];
    if (before) q.set('before', before);
    if (state.filterType) q.set('request_type', state.filterType);
    if (state.filterApp) q.set('application', state.filterApp);
    return '/generations?' + q;
  }

  // ---- formatting ----

  const intFmt = new Intl.NumberFormat('en-US');
  const fmtInt = (n) => intFmt.format(n);

  // fmtUSD renders a decimal string (the API's six decimals) exactly, from
  // the string itself rather than a float: every decimal that is not a
  // trailing zero, at least two. So a balance of 9.998313 shows as
  // $9.998313, one call's cost off $10.00 stays visible, and a tenth of a
  // cent never shows as $0.00.
  function fmtUSD(s) {
    const m = /^(-?)(\d+)(?:\.(\d+))?$/.exec(String(s).trim());
    if (!m) return s;
    const whole = m[2].replace(/^0+(?=\d)/, '');
    const frac = (m[3] || '').replace(/0+$/, '').padEnd(2, '0');
    const zero = /^0*$/.test(whole) && /^0*$/.test(frac);
    const sign = m[1] && !zero ? '−' : '';
    return sign + '$' + whole.replace(/\B(?=(\d{3})+(?!\d))/g, ',') + '.' + frac;
  }


  function fmtMetric(v) {
    return state.metric === 'cost' ? fmtUSD(v.toFixed(6)) : fmtInt(v);
  }

  function fmtMS(ms) {
    if (ms < 1000) return ms + ' ms';
    return (ms / 1000).toFixed(ms < 10000 ? 2 : 1) + ' s';
  }

  const timeFmt = new Intl.DateTimeFormat(undefined, {
    month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit', second: '2-digit',
  });
  const dayFmt = new Intl.DateTimeFormat('en-US', { weekday: 'short', month: 'short', day: 'numeric', timeZone: 'UTC' });

  // ---- dates (UTC days, as the gateway keeps usage and caps) ----

  const isoDay = (d) => d.toISOString().slice(0, 10);
  const parseDay = (s) => new Date(s + 'T00:00:00Z');


  function currentRange() {
    if (state.range === 'custom' && state.start && state.end) return { start: state.start, end: state.end };
    const end = utcToday();
    const start = new Date(end.getTime() - (Number(state.range) - 1) * DAY_MS);
    return { start: isoDay(start), end: isoDay(end) };
  }

  function daysOf(range) {
    const out = [];
    for (let t = parseDay(range.start).getTime(); t <= parseDay(range.end).getTime(); t += DAY_MS) {
      out.push(isoDay(new Date(t)));
    }
    return out;
  }

  // ---- DOM helpers ----



  const nextFrame = () => new Promise((resolve) => requestAnimationFrame(() => resolve()));

  // ---- screens and states ----

  function showSignIn(message, prefill) {
    document.body.dataset.state = 'signed-out';
    $('app').hidden = true;
    $('who').hidden = true;
    $('sign-out').hidden = true;
    $('banner').hidden = true;
    $('signin').hidden = false;
    const err = $('signin-error');
    err.textContent = message || '';
    err.hidden = !message;
    const input = $('key');
    input.value = prefill || '';
    input.setAttribute('aria-invalid', message ? 'true' : 'false');
    $('signin-submit').disabled = false;
    $('signin-submit').textContent = 'Sign in';
    input.focus();
  }


  // signedOut handles a 401 once signed in: the key was accepted when the
  // page opened, so it has been revoked (or the database replaced) since.
  function signedOut(message) {
    sessionStorage.removeItem(KEY_STORAGE);
    state.key = null;
    if (state.chart) { state.chart.destroy(); state.chart = null; }
    if ($('detail').open) $('detail').close();
    showSignIn(message);
  }

  // fail reports an error of a request made while signed in.
  function fail(err) {
    if (err instanceof APIError && err.kind === 'auth') {
      signedOut('This key is no longer accepted: it has been revoked or removed since you signed in. Sign in with another key. (' + err.message + ')');
      return;
    }
    showBanner(err instanceof APIError ? err.message : 'Something went wrong: ' + err);
  }

  // ---- sign in ----

  async function signIn(key, fromStorage) {
    state.key = key;
    document.body.dataset.state = 'signing-in';
    $('signin-submit').disabled = true;
    $('signin-submit').textContent = 'Signing in…';
    $('signin-error').hidden = true;
    const t0 = performance.now();
    let credits, usage, list;
    try {
      [credits, usage, list] = await Promise.all([api('/credits'), api(usageQuery()), api(callsQuery())]);
    } catch (err) {
      state.key = null;
      if (err.kind === 'auth') {
        sessionStorage.removeItem(KEY_STORAGE);
        showSignIn(fromStorage
          ? 'This key is no longer accepted: it has been revoked or removed. Sign in with another key.'
          : 'This key was not accepted: check that it is complete (llm_live_…). A revoked key is refused too.');
      } else {
        showSignIn(err.message, key);
      }
      return;
    }
    const fetched = performance.now();
    sessionStorage.setItem(KEY_STORAGE, key);
    state.credits = credits;
    state.usage = usage;
    state.list = list;

    $('signin').hidden = true;
    $('banner').hidden = true;
    $('app').hidden = false;
    $('who').hidden = false;
    $('sign-out').hidden = false;
    renderCredits();
    renderUsage();
    renderCalls();
    renderSnippets();
    await nextFrame();
    // How long sign-in took, for the speed benchmark: in all, and the part
    // spent waiting for the three responses.
    document.body.dataset.ttiFetch = String(Math.round(fetched - t0));
    document.body.dataset.tti = String(Math.round(performance.now() - t0));
    document.body.dataset.state = 'ready';
  }

  async function refreshAll() {
    $('banner').hidden = true;
    try {
      const [credits, usage, list] = await Promise.all([api('/credits'), api(usageQuery()), api(callsQuery())]);
      state.credits = credits;
      state.usage = usage;
      state.list = list;
      renderCredits();
      renderUsage();
      renderCalls();
    } catch (err) {
      fail(err);
    }
  }

  // ---- credits ----

  function capRow(label, spend, cap) {
    const s = Number(spend);
    const c = Number(cap);
    const frac = c > 0 ? Math.min(s / c, 1) : 1;
    const row = el('div', { class: 'cap' + (s >= c ? ' full' : frac >= 0.8 ? ' warn' : '') },
      el('span', { text: label }),
      el('span', { text: fmtUSD(spend) + ' of ' + fmtUSD(cap) }));
    const bar = el('span');
    bar.style.width = (frac * 100).toFixed(1) + '%';
    row.append(el('div', {
      class: 'meter', role: 'meter', 'aria-label': label, 'aria-valuemin': '0',
      'aria-valuemax': String(c), 'aria-valuenow': String(Math.min(s, c)),
    }, bar));
    return row;
  }

  function renderCaps(id, period, accountSpend, accountCap, keySpend, keyCap) {
    const rows = [];
    if (accountCap !== null) rows.push(capRow('Account ' + period + ' cap', accountSpend, accountCap));
    if (keyCap !== null) rows.push(capRow('This key: ' + period + ' cap', keySpend, keyCap));
    else if (accountCap !== null || Number(keySpend) !== Number(accountSpend)) {
      rows.push(el('span', { text: 'This key: ' + fmtUSD(keySpend) + ', no cap of its own' }));
    }
    if (rows.length === 0) rows.push(el('span', { text: 'No ' + period + ' cap' }));
    $(id).replaceChildren(...rows);
  }

  function renderCredits() {
    const c = state.credits;
    setText('balance', fmtUSD(c.balance), c.balance + ' USD');
    $('balance').classList.toggle('neg', Number(c.balance) < 0);
    setText('total-used', fmtUSD(c.total_used), c.total_used + ' USD');
    setText('spend-today', fmtUSD(c.spend_today), c.spend_today + ' USD');
    setText('spend-month', fmtUSD(c.spend_this_month), c.spend_this_month + ' USD');
    renderCaps('caps-today', 'daily', c.spend_today, c.daily_cap, c.key.spend_today, c.key.daily_cap);
    renderCaps('caps-month', 'monthly', c.spend_this_month, c.monthly_cap, c.key.spend_this_month, c.key.monthly_cap);
    setText('key-name', c.key.name);
    setText('key-id', c.key.id);
  }

  // ---- usage chart ----

  function bucketLabel(b) {
    if (state.group === 'api_key') {
      if (b === '') return '(no key)';
      return state.credits && b === state.credits.key.id ? b + ' (this key)' : b;
    }
    if (state.group === 'application' && b === '') return '(no application)';
    return b || '(none)';
  }

  // chartSeries turns the usage report into one value per day per series.
  function chartSeries() {
    const range = { start: state.usage.start_date.slice(0, 10), end: isoDay(new Date(Date.parse(state.usage.end_date) - DAY_MS)) };
    const days = daysOf(range);
    const index = new Map(days.map((d, i) => [d, i]));
    const value = (row) => (state.metric === 'cost' ? Number(row.cost) : row.requests);
    let series;
    if (!state.group) {
      const values = days.map(() => 0);
      for (const row of state.usage.data) {
        if (index.has(row.bucket)) values[index.get(row.bucket)] = value(row);
      }
      series = [{ label: state.metric === 'cost' ? 'Spend' : 'Requests', color: 0, values }];
    } else {
      const byBucket = new Map();
      for (const row of state.usage.data) {
        if (!index.has(row.day)) continue;
        let s = byBucket.get(row.bucket);
        if (!s) {
          s = { label: bucketLabel(row.bucket), bucket: row.bucket, values: days.map(() => 0), total: 0 };
          byBucket.set(row.bucket, s);
        }
        const v = value(row);
        s.values[index.get(row.day)] += v;
        s.total += v;
      }
      const ranked = [...byBucket.values()].sort((a, b) => b.total - a.total || (a.label < b.label ? -1 : 1));
      series = ranked.slice(0, MAX_SERIES);
      if (ranked.length > MAX_SERIES) {
        const other = { label: 'other (' + (ranked.length - MAX_SERIES) + ')', values: days.map(() => 0) };
        for (const s of ranked.slice(MAX_SERIES)) s.values.forEach((v, i) => { other.values[i] += v; });
        series.push(other);
      }
      series.forEach((s, i) => { s.color = i === MAX_SERIES ? 7 : i; });
    }
    for (const s of series) s.total = s.values.reduce((a, b) => a + b, 0);
    return { days, xs: days.map((d) => parseDay(d).getTime() / 1000), series };
  }


  function drawChart() {
    const box = $('chart');
    if (state.chart) { state.chart.destroy(); state.chart = null; }
    const { xs, series } = state.series;
    // Stacked bars: series k is drawn as the sum of series 0..k, tallest
    // first, so each shorter one covers the bottom of the one before.
    const sums = [];
    let acc = xs.map(() => 0);
    for (const s of series) {
      acc = acc.map((v, i) => v + s.values[i]);
      sums.push(acc);
    }
    const order = series.map((_, i) => i).reverse();
    const muted = cssVar('--muted');
    const grid = cssVar('--grid');
    const font = '12px system-ui, "DejaVu Sans", sans-serif';
    const bars = uPlot.paths.bars({ size: [0.72, 48], gap: 1 });
    const opts = {
      width: box.clientWidth,
      height: box.clientHeight,
      tzDate: (ts) => uPlot.tzDate(new Date(ts * 1000), 'Etc/UTC'),
      legend: { show: false },
      cursor: { y: false, points: { show: false }, drag: { x: false, y: false, setScale: false } },
      scales: {
        x: { time: true, range: (u, min, max) => [min - DAY_MS / 2000, max + DAY_MS / 2000] },
        y: { range: (u, min, max) => [0, max > 0 ? max * 1.08 : 1] },
      },
      axes: [
        { stroke: muted, font, grid: { show: false }, ticks: { stroke: grid } },
        {
          stroke: muted, font, size: 70, grid: { stroke: grid, width: 1 }, ticks: { show: false },
          values: (u, vals) => vals.map((v) => (state.metric === 'cost' ? fmtAxisUSD(v) : fmtInt(v))),
        },
      ],
      series: [{}].concat(order.map((i) => {
        const color = cssVar('--s' + series[i].color);
        return { label: series[i].label, fill: color, stroke: color, width: 0, paths: bars, points: { show: false } };
      })),
      hooks: { setCursor: [(u) => showReadout(u.cursor.idx)] },
    };
    state.chart = new uPlot(opts, [xs].concat(order.map((i) => sums[i])), box);
  }

  function showReadout(idx) {
    const r = $('readout');
    if (idx === null || idx === undefined || !state.series) {
      r.textContent = 'Point at a day, or focus the chart and use ← →, for its figures.';
      return;
    }
    const { days, series } = state.series;
    const total = series.reduce((a, s) => a + s.values[idx], 0);
    let text = dayFmt.format(parseDay(days[idx])) + ': ' + fmtMetric(total);
    if (series.length > 1) {
      const parts = series.filter((s) => s.values[idx] > 0).map((s) => s.label + ' ' + fmtMetric(s.values[idx]));
      if (parts.length) text += ' — ' + parts.join(', ');
    }
    r.textContent = text;
  }

  function renderLegend() {
    const { series } = state.series;
    $('legend').replaceChildren(...series.map((s) => {
      const swatch = el('i', { 'aria-hidden': 'true' });
      swatch.style.background = cssVar('--s' + s.color);
      return el('li', null, swatch, el('span', { text: s.label }), el('span', { class: 'muted', text: fmtMetric(s.total) }));
    }));
  }

  function renderUsage() {
    const u = state.usage;
    setText('total-cost', fmtUSD(u.total.cost), u.total.cost + ' USD');
    setText('total-requests', fmtInt(u.total.requests));
    setText('total-input', fmtInt(u.total.input_tokens));
    setText('total-output', fmtInt(u.total.output_tokens));
    $('chart-empty').hidden = u.total.requests > 0;
    if (state.group === 'application') {
      const apps = [...new Set(u.data.map((r) => r.bucket).filter(Boolean))].sort();
      $('apps').replaceChildren(...apps.map((a) => el('option', { value: a })));
    }
    state.series = chartSeries();
    drawChart();
    renderLegend();
    showReadout(null);
  }

  async function reloadUsage() {
    const seq = ++state.seq.usage;
    const card = $('usage');
    card.setAttribute('aria-busy', 'true');
    try {
      const usage = await api(usageQuery());
      if (seq !== state.seq.usage) return; // a later change superseded this one
      state.usage = usage;
      renderUsage();
    } catch (err) {
      if (seq === state.seq.usage) fail(err);
    } finally {
      if (seq === state.seq.usage) card.removeAttribute('aria-busy');
    }
  }

  // ---- recent calls ----

  function ratingCell(g) {
    const f = g.feedback;
    const parts = [];
    if (f.review) parts.push(el('span', { class: f.review.rating, text: f.review.rating === 'up' ? '▲ you' : '▼ you' }));
    const others = { up: f.up - (f.review && f.review.rating === 'up' ? 1 : 0), down: f.down - (f.review && f.review.rating === 'down' ? 1 : 0) };
    if (others.up) parts.push(el('span', { class: 'up', text: ' ▲' + others.up }));
    if (others.down) parts.push(el('span', { class: 'down', text: ' ▼' + others.down }));
    if (!parts.length) parts.push(el('span', { text: '—' }));
    return el('td', { class: 'rating' }, ...parts);
  }

  function renderCalls() {
    const l = state.list;
    const rows = l.data.map((g) => {
      const when = new Date(g.created_at);
      const open = el('button', { type: 'button', class: 'link', title: g.created_at + ' · ' + g.id, text: timeFmt.format(when) });
      open.addEventListener('click', (e) => { e.stopPropagation(); openDetail(g); });
      const tr = el('tr', { 'data-id': g.id },
        el('td', null, open),
        el('td', { text: g.application || '—' }),
        el('td', null, el('span', { class: 'pill', text: g.request_type || '—' })),
        el('td', { class: 'opt', text: g.surface }),
        el('td', { class: 'opt', text: g.streamed ? 'yes' : 'no' }),
        el('td', { class: 'num opt2', text: fmtInt(g.usage.prompt_tokens) + ' / ' + fmtInt(g.usage.completion_tokens) }),
        el('td', { class: 'num', title: g.total_cost + ' USD', text: fmtUSD(g.total_cost) }),
        el('td', { class: 'num opt2', text: fmtMS(g.latency_ms) }),
        el('td', { class: 'opt', text: g.finish_reason || '—' }),
        ratingCell(g));
      tr.addEventListener('click', () => openDetail(g));
      return tr;
    });
    $('calls-body').replaceChildren(...rows);
    const filtered = state.filterType || state.filterApp;
    const empty = $('calls-empty');
    empty.hidden = rows.length > 0;
    empty.textContent = filtered
      ? 'No calls match these filters.'
      : state.cursors.length > 1 ? 'No older calls.' : 'No calls yet. Make one with a snippet below, and it shows here.';
    $('newer').disabled = state.cursors.length <= 1;
    $('older').disabled = !l.has_more;
    const page = state.cursors.length;
    setText('page-info', rows.length ? 'Page ' + page + (l.has_more ? '' : ' (last)') : '');
    const apps = $('apps');
    if (!apps.children.length) {
      const seen = [...new Set(l.data.map((g) => g.application).filter(Boolean))].sort();
      apps.replaceChildren(...seen.map((a) => el('option', { value: a })));
    }
  }

  async function reloadCalls() {
    const seq = ++state.seq.calls;
    const card = $('calls-card');
    card.setAttribute('aria-busy', 'true');
    try {
      const list = await api(callsQuery());
      if (seq !== state.seq.calls) return;
      state.list = list;
      renderCalls();
    } catch (err) {
      if (seq === state.seq.calls) fail(err);
    } finally {
      if (seq === state.seq.calls) card.removeAttribute('aria-busy');
    }
  }

  // ---- one call ----

  function openDetail(g) {
    state.detail = g;
    setText('detail-h', 'Call of ' + timeFmt.format(new Date(g.created_at)));
    setText('detail-id', g.id);
    const u = g.usage;
    const fields = [
      ['Time', new Date(g.created_at).toLocaleString() + ' (' + g.created_at + ')'],
      ['Application', g.application || '—'],
      ['Model (as sent)', g.model || '—'],
      ['Request type', g.request_type || '—'],
      ['Surface', g.surface],
      ['API key', g.api_key || '—'],
      ['Streamed', g.streamed ? 'yes' : 'no'],
      ['Finish reason', g.finish_reason || '—'],
      ['Input tokens', fmtInt(u.prompt_tokens) + (u.cached_prompt_tokens ? ' (' + fmtInt(u.cached_prompt_tokens) + ' cached)' : '')],
      ['Output tokens', fmtInt(u.completion_tokens) + (u.reasoning_tokens ? ' (' + fmtInt(u.reasoning_tokens) + ' reasoning)' : '')],
      ['Cost', g.total_cost + ' USD'],
      ['Time to first token', fmtMS(g.latency_ms)],
      ['Generation time', fmtMS(g.generation_time_ms)],
      ['Ratings', '▲ ' + g.feedback.up + '  ▼ ' + g.feedback.down],
    ];
    $('detail-fields').replaceChildren(...fields.flatMap(([k, v]) => [el('dt', { text: k }), el('dd', { text: v })]));
    $('detail-json').textContent = JSON.stringify(g, null, 2);
    const review = g.feedback.review;
    setRating(review ? review.rating : '');
    $('fb-comment').value = review ? review.comment : '';
    const status = $('fb-status');
    status.textContent = review ? 'Reviewed.' : '';
    status.className = '';
    $('fb-save').disabled = !review;
    const d = $('detail');
    if (!d.open) d.showModal();
  }

  function setRating(r) {
    state.rating = r;
    for (const b of document.querySelectorAll('#feedback [data-rating]')) {
      b.setAttribute('aria-pressed', String(b.dataset.rating === r));
    }
    $('fb-save').disabled = !r;
  }

  async function saveReview(e) {
    e.preventDefault();
    const g = state.detail;
    if (!g || !state.rating) return;
    const status = $('fb-status');
    status.className = '';
    status.textContent = 'Saving…';
    $('fb-save').disabled = true;
    try {
      await api('/feedback', {
        method: 'POST',
        body: JSON.stringify({ id: g.id, rating: state.rating, comment: $('fb-comment').value, end_user: REVIEW_END_USER }),
      });
      status.className = 'ok';
      status.textContent = 'Saved.';
      // Read the page again, so the table shows what is stored.
      const list = await api(callsQuery());
      state.list = list;
      renderCalls();
      const fresh = list.data.find((x) => x.id === g.id);
      if (fresh) {
        state.detail = fresh;
        $('detail-json').textContent = JSON.stringify(fresh, null, 2);
      }
    } catch (err) {
      if (err instanceof APIError && err.kind === 'auth') { fail(err); return; }
      status.className = 'err';
      status.textContent = err.message;
    } finally {
      $('fb-save').disabled = !state.rating;
    }
  }

  // ---- snippets ----

  function snippets() {
    const base = location.origin;
    return [
      ['curl', [
        '# export SVCGW_API_KEY=llm_live_…   (your key)',
        'curl ' + base + '/svc/v1/chat/completions \\',
        '  -H "Authorization: Bearer $SVCGW_API_KEY" \\',
        '  -H "Content-Type: application/json" \\',
        '  -d \'{"model":"svc-fusion","messages":[{"role":"user","content":"Hello"}]}\'',
      ]],
      ['OpenAI · Python', [
        'import os',
        'from openai import OpenAI',
        '',
        'client = OpenAI(base_url="' + base + '/svc/v1", api_key=os.environ["SVCGW_API_KEY"])',
        'r = client.chat.completions.create(model="svc-fusion", messages=[{"role": "user", "content": "Hello"}])',
        'print(r.choices[0].message.content)',
      ]],
      ['Anthropic · Python', [
        'import os',
        'import anthropic',
        '',
        'client = anthropic.Anthropic(base_url="' + base + '/svc", api_key=os.environ["SVCGW_API_KEY"])',
        'm = client.messages.create(model="svc-fusion", max_tokens=1024, messages=[{"role": "user", "content": "Hello"}])',
        'print(m.content[0].text)',
      ]],
      ['Gemini · Python', [
        'import os',
        'from google import genai',
        'from google.genai import types',
        '',
        'client = genai.Client(api_key=os.environ["SVCGW_API_KEY"],',
        '                      http_options=types.HttpOptions(base_url="' + base + '/svc/"))',
        'r = client.models.generate_content(model="svc-fusion", contents="Hello")',
        'print(r.text)',
      ]],
      ['OpenAI · TypeScript', [
        'import OpenAI from "openai";',
        '',
        'const client = new OpenAI({ baseURL: "' + base + '/svc/v1", apiKey: process.env.SVCGW_API_KEY });',
        'const r = await client.chat.completions.create({ model: "svc-fusion", messages: [{ role: "user", content: "Hello" }] });',
        'console.log(r.choices[0].message.content);',
      ]],
    ].map(([name, lines]) => ({ name, text: lines.join('\n') }));
  }

  function renderSnippets() {
    const all = snippets();
    setText('base-openai', location.origin + '/svc/v1');
    setText('base-svc', location.origin + '/svc');
    const tabs = all.map((s, i) => {
      const b = el('button', { type: 'button', role: 'tab', 'aria-selected': String(i === 0), 'aria-controls': 'snippet', tabindex: i === 0 ? '0' : '-1', text: s.name });
      b.addEventListener('click', () => select(i));
      b.addEventListener('keydown', (e) => {
        const d = e.key === 'ArrowRight' ? 1 : e.key === 'ArrowLeft' ? -1 : 0;
        if (d) { e.preventDefault(); select((i + d + all.length) % all.length); tabs[(i + d + all.length) % all.length].focus(); }
      });
      return b;
    });
    function select(i) {
      tabs.forEach((t, j) => { t.setAttribute('aria-selected', String(i === j)); t.tabIndex = i === j ? 0 : -1; });
      $('snippet').textContent = all[i].text;
      $('copy').textContent = 'Copy';
    }
    $('snip-tabs').replaceChildren(...tabs);
    select(0);
  }

  async function copySnippet() {
    const text = $('snippet').textContent;
    let ok = false;
    if (navigator.clipboard && window.isSecureContext) {
      try { await navigator.clipboard.writeText(text); ok = true; } catch (_) { /* fall back */ }
    }
    if (!ok) {
      // Plain http on another host is not a secure context: select and copy.
      const range = document.createRange();
      range.selectNodeContents($('snippet'));
      const sel = getSelection();
      sel.removeAllRanges();
      sel.addRange(range);
      try { ok = document.execCommand('copy'); } catch (_) { ok = false; }
    }
    $('copy').textContent = ok ? 'Copied' : 'Press Ctrl+C';
  }

  // ---- wiring ----

  function wire() {
    $('signin-form').addEventListener('submit', (e) => {
      e.preventDefault();
      const key = $('key').value.trim();
      if (!key) {
        showSignIn('Paste an API key (llm_live_…).');
        return;
      }
      signIn(key, false);
    });
    $('sign-out').addEventListener('click', () => signedOut(''));
    $('banner-retry').addEventListener('click', refreshAll);

    for (const b of document.querySelectorAll('[data-metric]')) {
      b.addEventListener('click', () => {
        state.metric = b.dataset.metric;
        for (const o of document.querySelectorAll('[data-metric]')) o.setAttribute('aria-pressed', String(o === b));
        if (state.usage) renderUsage();
      });
    }
    $('group').addEventListener('change', (e) => { state.group = e.target.value; reloadUsage(); });
    $('range').addEventListener('change', (e) => {
      state.range = e.target.value;
      const custom = state.range === 'custom';
      $('custom-range').hidden = !custom;
      if (custom) {
        const r = { start: state.usage.start_date.slice(0, 10), end: isoDay(new Date(Date.parse(state.usage.end_date) - DAY_MS)) };
        state.start = r.start;
        state.end = r.end;
        $('start').value = r.start;
        $('end').value = r.end;
        $('start').focus();
        return;
      }
      reloadUsage();
    });
    for (const id of ['start', 'end']) {
      $(id).addEventListener('change', () => {
        const s = $('start').value;
        const e = $('end').value;
        if (!s || !e) return;
        if (s > e) { showBanner('The start date is after the end date.'); return; }
        $('banner').hidden = true;
        state.start = s;
        state.end = e;
        reloadUsage();
      });
    }
    $('chart').tabIndex = 0;
    $('chart').addEventListener('keydown', (e) => {
      const u = state.chart;
      if (!u || (e.key !== 'ArrowLeft' && e.key !== 'ArrowRight')) return;
      e.preventDefault();
      const n = state.series.xs.length;
      let i = u.cursor.idx === null || u.cursor.idx === undefined ? n - 1 : u.cursor.idx + (e.key === 'ArrowRight' ? 1 : -1);
      i = Math.max(0, Math.min(n - 1, i));
      u.setCursor({ left: u.valToPos(state.series.xs[i], 'x'), top: u.bbox.height / devicePixelRatio / 2 });
      showReadout(i);
    });

    $('f-type').addEventListener('change', (e) => { state.filterType = e.target.value; state.cursors = ['']; reloadCalls(); });
    $('filters').addEventListener('submit', (e) => e.preventDefault());
    $('f-app').addEventListener('change', (e) => { state.filterApp = e.target.value.trim(); state.cursors = ['']; reloadCalls(); });
    $('older').addEventListener('click', () => {
      if (!state.list || !state.list.last_id) return;
      state.cursors.push(state.list.last_id);
      reloadCalls();
    });
    $('newer').addEventListener('click', () => {
      if (state.cursors.length <= 1) return;
      state.cursors.pop();
      reloadCalls();
    });

    for (const b of document.querySelectorAll('#feedback [data-rating]')) {
      b.addEventListener('click', () => setRating(state.rating === b.dataset.rating ? '' : b.dataset.rating));
    }
    $('feedback').addEventListener('submit', saveReview);
    $('copy').addEventListener('click', copySnippet);

    new ResizeObserver(() => {
      const u = state.chart;
      const box = $('chart');
      if (u && box.clientWidth > 0) u.setSize({ width: box.clientWidth, height: box.clientHeight });
    }).observe($('chart'));
    matchMedia('(prefers-color-scheme: dark)').addEventListener('change', () => {
      if (state.series) { drawChart(); renderLegend(); }
    });
  }

  wire();
  const stored = sessionStorage.getItem(KEY_STORAGE);
  if (stored) signIn(stored, true);
  else showSignIn('');
})();
