// svcgw operator's page: plain JavaScript, no build step. uPlot (vendored)
// draws the usage chart. The admin token lives in sessionStorage only and
// travels only in the Authorization header of same-origin calls to the
// management API (/admin/v1) of the admin listener that served this page.
(() => {
  'use strict';

  const TOKEN_STORAGE = 'svcgw.admin-token';
  const API = '/admin/v1';
  const PAGE_SIZE = 50;
  const TOP_N = 10;
  const DAY_MS = 86400000;

  const { $, cssVar, el, fmtAxisUSD, setText, showBanner, utcToday } = window.svcgwPage; // common.js

  const state = {
    token: null,
    self: null, // {name, read_only}
    view: '', // 'accounts', 'account' or 'audit'
    accountCursors: [''], // the cursor of each page of accounts shown so far
    account: null, // the account shown in the account view
    metric: 'cost',
    usage: null,
    chart: null,
    creditIdem: '', // the Idempotency-Key of the credit form's current entry
    creditsCursor: null,
    auditCursor: null,
    keys: [],
    limitsKey: null,
    seq: 0,
  };

  // ---- the API ----

  class APIError extends Error {
    constructor(kind, message, status, code) {
      super(message);
      this.kind = kind; // 'network', 'auth', 'forbidden', 'server' or 'request'
      this.status = status || 0;
      this.code = code || '';
    }
  }

  async function call(url, init) {
    const headers = Object.assign({ Authorization: 'Bearer ' + state.token, Accept: 'application/json' }, (init && init.headers) || {});
    if (init && init.body) headers['Content-Type'] = 'application/json';
    let res;
    try {
      res = await fetch(url, Object.assign({}, init, {
        headers, cache: 'no-store', credentials: 'omit', referrerPolicy: 'no-referrer',
      }));
    } catch (_) {
      throw new APIError('network', 'Cannot reach the admin listener at ' + location.host + '. Check that svcgw is running and the network is up.');
    }
    let body = null;
    try { body = await res.json(); } catch (_) { /* not JSON */ }
    if (res.ok && body) return { body, replayed: res.headers.get('Idempotent-Replayed') === 'true' };
    const err = (body && body.error) || {};
    const message = err.message || 'The admin listener answered HTTP ' + res.status + '.';
    if (res.status === 401) throw new APIError('auth', message, 401, err.code);
    if (res.status === 403) throw new APIError('forbidden', message, 403, err.code);
    if (res.status >= 500 || !body) throw new APIError('server', message, res.status, err.code);
    throw new APIError('request', message, res.status, err.code);
  }

  const api = async (path, init) => (await call(API + path, init)).body;
  const enc = encodeURIComponent;

  // ---- formatting ----

  const intFmt = new Intl.NumberFormat('en-US');
  const fmtInt = (n) => intFmt.format(n);

  // fmtUSD renders the API's decimal string exactly (as the key holder's
  // page does): every decimal that is not a trailing zero, at least two.
  function fmtUSD(s) {
    if (s === null || s === undefined) return '—';
    const m = /^(-?)(\d+)(?:\.(\d+))?$/.exec(String(s).trim());
    if (!m) return s;
    const whole = m[2].replace(/^0+(?=\d)/, '');
    const frac = (m[3] || '').replace(/0+$/, '').padEnd(2, '0');
    const zero = /^0*$/.test(whole) && /^0*$/.test(frac);
    const sign = m[1] && !zero ? '−' : '';
    return sign + '$' + whole.replace(/\B(?=(\d{3})+(?!\d))/g, ',') + '.' + frac;
  }


  const timeFmt = new Intl.DateTimeFormat(undefined, {
    year: 'numeric', month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit', second: '2-digit',
  });
  const fmtTime = (s) => (s ? timeFmt.format(new Date(s)) : '—');
  const dayFmt = new Intl.DateTimeFormat('en-US', { weekday: 'short', month: 'short', day: 'numeric', timeZone: 'UTC' });

  // ---- dates (UTC days, as the gateway keeps usage and caps) ----

  const isoDay = (d) => d.toISOString().slice(0, 10);
  const parseDay = (s) => new Date(s + 'T00:00:00Z');


  // lastDays is the range of the n UTC days ending today.
  function lastDays(n) {
    const end = utcToday();
    return { start: isoDay(new Date(end.getTime() - (n - 1) * DAY_MS)), end: isoDay(end) };
  }

  // ---- DOM helpers ----



  function setStatus(id, text, kind) {
    const e = $(id);
    e.textContent = text;
    e.className = 'status' + (kind ? ' ' + kind : '');
  }

  const nextFrame = () => new Promise((resolve) => requestAnimationFrame(() => resolve()));

  // newIdempotencyKey names one credit the operator means to add: the form
  // sends it with every submit of the same entry, so a double click or a
  // retried request credits once (the API answers the repeat with the
  // first response).
  function newIdempotencyKey() {
    if (crypto.randomUUID) return 'dash-' + crypto.randomUUID();
    const b = crypto.getRandomValues(new Uint8Array(16));
    return 'dash-' + [...b].map((x) => x.toString(16).padStart(2, '0')).join('');
  }

  // ---- sign in and out ----

  function showSignIn(message, prefill) {
    document.body.dataset.state = 'signed-out';
    for (const v of ['view-accounts', 'view-account', 'view-audit', 'nav', 'who', 'sign-out', 'banner']) $(v).hidden = true;
    $('signin').hidden = false;
    const err = $('signin-error');
    err.textContent = message || '';
    err.hidden = !message;
    const input = $('token');
    input.value = prefill || '';
    input.setAttribute('aria-invalid', message ? 'true' : 'false');
    $('signin-submit').disabled = false;
    $('signin-submit').textContent = 'Sign in';
    input.focus();
  }


  function signedOut(message) {
    sessionStorage.removeItem(TOKEN_STORAGE);
    state.token = null;
    state.self = null;
    if (state.chart) { state.chart.destroy(); state.chart = null; }
    if ($('limits').open) $('limits').close();
    showSignIn(message);
  }

  // fail reports an error of a request made while signed in.
  function fail(err, statusId) {
    if (err instanceof APIError && err.kind === 'auth') {
      signedOut('This admin token is no longer accepted: it has been revoked since you signed in. (' + err.message + ')');
      return;
    }
    const message = err instanceof APIError ? err.message : 'Something went wrong: ' + err;
    if (statusId && err instanceof APIError && (err.kind === 'request' || err.kind === 'forbidden')) {
      setStatus(statusId, message, 'err');
      return;
    }
    showBanner(message);
  }

  async function signIn(token, fromStorage) {
    state.token = token;
    document.body.dataset.state = 'signing-in';
    $('signin-submit').disabled = true;
    $('signin-submit').textContent = 'Signing in…';
    $('signin-error').hidden = true;
    let self;
    try {
      self = (await call('/admin/token')).body;
    } catch (err) {
      state.token = null;
      if (err.kind === 'auth') {
        sessionStorage.removeItem(TOKEN_STORAGE);
        showSignIn(fromStorage
          ? 'This admin token is no longer accepted: it has been revoked. Sign in with another.'
          : 'This admin token was not accepted: check that it is complete. A revoked token is refused too.');
      } else {
        showSignIn(err.message, token);
      }
      return;
    }
    sessionStorage.setItem(TOKEN_STORAGE, token);
    state.self = self;
    $('signin').hidden = true;
    $('nav').hidden = false;
    $('who').hidden = false;
    $('sign-out').hidden = false;
    setText('token-name', self.name);
    setText('token-mode', self.read_only ? 'read-only' : 'read-write');
    document.body.dataset.readOnly = String(self.read_only);
    if (self.read_only) {
      // A read-only token changes nothing (the API refuses it 403): the
      // page offers it no control that would.
      for (const e of document.querySelectorAll('.write')) e.remove();
    }
    await route();
  }

  // ---- views, by the URL's fragment: #, #account=NAME, #audit ----

  async function route() {
    if (!state.token) return;
    const h = location.hash.slice(1);
    const seq = ++state.seq;
    document.body.dataset.state = 'loading';
    $('banner').hidden = true;
    let view = 'accounts';
    if (h.startsWith('account=')) view = 'account';
    else if (h === 'audit') view = 'audit';
    try {
      if (view === 'account') await showAccount(decodeURIComponent(h.slice('account='.length)), seq);
      else if (view === 'audit') await showAudit(seq);
      else await showAccounts(seq);
    } catch (err) {
      if (seq === state.seq) fail(err);
      return;
    }
    if (seq !== state.seq) return;
    state.view = view;
    $('view-accounts').hidden = view !== 'accounts';
    $('view-account').hidden = view !== 'account';
    $('view-audit').hidden = view !== 'audit';
    $('nav-accounts').toggleAttribute('aria-current', view !== 'audit');
    if (view !== 'audit') $('nav-accounts').setAttribute('aria-current', 'page');
    $('nav-audit').toggleAttribute('aria-current', view === 'audit');
    if (view === 'audit') $('nav-audit').setAttribute('aria-current', 'page');
    if (view === 'account') drawChart();
    await nextFrame();
    document.body.dataset.state = 'ready';
  }

  // ---- accounts and top spenders ----

  async function showAccounts(seq) {
    const [page, top] = await Promise.all([loadAccounts(), api(topQuery())]);
    if (seq !== state.seq) return;
    renderAccounts(page);
    renderTop(top);
  }

  function loadAccounts() {
    const q = new URLSearchParams({ limit: String(PAGE_SIZE) });
    const cursor = state.accountCursors[state.accountCursors.length - 1];
    if (cursor) q.set('cursor', cursor);
    return api('/accounts?' + q);
  }

  function renderAccounts(page) {
    const rows = page.data.map((a) => {
      const open = el('a', { href: '#account=' + enc(a.name), text: a.name });
      const capCell = (spend, cap) => el('td', {
        class: 'num opt' + (cap !== null && Number(spend) >= Number(cap) ? ' full' : ''),
        text: cap === null ? 'none' : fmtUSD(cap),
      });
      return el('tr', { 'data-name': a.name },
        el('td', null, open),
        el('td', { class: 'num' + (Number(a.balance) <= 0 ? ' neg' : ''), title: a.balance + ' USD', text: fmtUSD(a.balance) }),
        el('td', { class: 'num', title: a.spend_today + ' USD', text: fmtUSD(a.spend_today) }),
        el('td', { class: 'num', title: a.spend_this_month + ' USD', text: fmtUSD(a.spend_this_month) }),
        capCell(a.spend_today, a.daily_cap),
        capCell(a.spend_this_month, a.monthly_cap),
        el('td', { class: 'num opt2 rates', text: accountRate(a.rpm) + ' / ' + accountRate(a.tpm) }),
        el('td', { class: 'num opt2', text: fmtUSD(a.total_used) }));
    });
    $('accounts-body').replaceChildren(...rows);
    $('accounts-empty').hidden = rows.length > 0;
    $('acc-first').disabled = state.accountCursors.length <= 1;
    $('acc-next').disabled = !page.has_more;
    $('acc-next').dataset.cursor = page.next_cursor || '';
    const n = state.accountCursors.length;
    setText('acc-info', rows.length ? 'Page ' + n + (page.has_more ? '' : ' (last)') : '');
  }

  function topRange() {
    const v = $('top-range').value;
    if (v === 'custom' && $('top-start').value && $('top-end').value) return { start: $('top-start').value, end: $('top-end').value };
    return lastDays(v === 'custom' ? 30 : Number(v));
  }

  function topQuery() {
    const r = topRange();
    return '/usage?' + new URLSearchParams({ group_by: 'account', start_date: r.start, end_date: r.end });
  }

  function renderTop(report) {
    const rows = report.data.filter((b) => Number(b.cost) > 0 || b.requests > 0)
      .sort((a, b) => Number(b.cost) - Number(a.cost) || b.requests - a.requests || (a.bucket < b.bucket ? -1 : 1))
      .slice(0, TOP_N);
    const max = rows.length ? Math.max(...rows.map((b) => Number(b.cost))) : 0;
    $('top-list').replaceChildren(...rows.map((b) => {
      const bar = el('span');
      bar.style.width = (max > 0 ? (Number(b.cost) / max) * 100 : 0).toFixed(1) + '%';
      return el('li', { 'data-name': b.bucket },
        el('a', { href: '#account=' + enc(b.bucket), text: b.bucket }),
        el('div', { class: 'meter', 'aria-hidden': 'true' }, bar),
        el('span', { title: b.cost + ' USD', text: fmtUSD(b.cost) + ' · ' + fmtInt(b.requests) + ' calls' }));
    }));
    $('top-empty').hidden = rows.length > 0;
    const r = topRange();
    setText('top-total', 'All accounts, ' + r.start + ' to ' + r.end + ' (UTC): ' + fmtUSD(report.total.cost) + ', ' + fmtInt(report.total.requests) + ' calls.');
  }

  async function reloadTop() {
    const card = $('top-card');
    card.setAttribute('aria-busy', 'true');
    try {
      renderTop(await api(topQuery()));
    } catch (err) {
      fail(err);
    } finally {
      card.removeAttribute('aria-busy');
    }
  }

  // ---- one account ----

  async function showAccount(name, seq) {
    const n = enc(name);
    const [account, keys, credits, usage] = await Promise.all([
      api('/accounts/' + n), api('/accounts/' + n + '/keys'), api('/accounts/' + n + '/credits?limit=' + PAGE_SIZE), api(usageQuery(name)),
    ]);
    if (seq !== state.seq) return;
    if (!state.account || state.account.name !== name) {
      state.creditIdem = newIdempotencyKey();
      $('secret').hidden = true;
      for (const id of ['nk-status', 'cr-status', 'caps-status']) if ($(id)) setStatus(id, '');
    }
    state.account = account;
    state.usage = usage;
    renderAccount(account);
    renderKeys(keys.data);
    renderCredits(credits, false);
  }

  function renderAccount(a) {
    setText('a-name', a.name);
    setText('a-balance', fmtUSD(a.balance), a.balance + ' USD');
    $('a-balance').classList.toggle('neg', Number(a.balance) <= 0);
    setText('a-used', fmtUSD(a.total_used));
    setText('a-today', fmtUSD(a.spend_today), a.spend_today + ' USD');
    setText('a-month', fmtUSD(a.spend_this_month), a.spend_this_month + ' USD');
    const cap = (id, label, spend, c) => {
      setText(id, c === null ? 'No ' + label + ' cap' : label[0].toUpperCase() + label.slice(1) + ' cap ' + fmtUSD(c));
      $(id).classList.toggle('full', c !== null && Number(spend) >= Number(c));
    };
    cap('a-daily-cap', 'daily', a.spend_today, a.daily_cap);
    cap('a-monthly-cap', 'monthly', a.spend_this_month, a.monthly_cap);
    setText('a-rpm', hasRate(a.rpm) ? fmtInt(a.rpm) + ' requests' : 'No request limit');
    setText('a-tpm', hasRate(a.tpm) ? fmtInt(a.tpm) + ' tokens' : 'No token limit');
    if ($('caps-form')) {
      $('cap-daily').value = a.daily_cap === null ? '' : trimUSD(a.daily_cap);
      $('cap-monthly').value = a.monthly_cap === null ? '' : trimUSD(a.monthly_cap);
      $('cap-rpm').value = hasRate(a.rpm) ? String(a.rpm) : '';
      $('cap-tpm').value = hasRate(a.tpm) ? String(a.tpm) : '';
    }
  }

  // An account's requests or tokens per minute, across its keys: null or
  // 0 is none (its keys have their own limits only).
  const hasRate = (v) => v !== null && v !== undefined && v !== 0;
  const accountRate = (v) => (hasRate(v) ? fmtInt(v) : 'none');

  // trimUSD is the API's amount without its trailing zeros, for a field.
  const trimUSD = (s) => s.replace(/(\.\d*?[1-9])0+$/, '$1').replace(/\.0*$/, '');

  function renderKeys(keys) {
    state.keys = keys;
    const write = !state.self.read_only;
    $('keys-body').replaceChildren(...keys.map((k) => {
      const actions = el('td', { class: 'actions write' });
      if (write && k.status !== 'revoked') {
        const edit = el('button', { type: 'button', 'data-action': 'limits', text: 'Limits…' });
        edit.addEventListener('click', () => openLimits(k));
        const revoke = el('button', { type: 'button', 'data-action': 'revoke', text: 'Revoke' });
        revoke.addEventListener('click', () => revokeKey(k, revoke));
        actions.append(edit, revoke);
      }
      const rate = (v) => (v === null ? 'default' : v === 0 ? 'unlimited' : fmtInt(v));
      const tr = el('tr', { 'data-id': k.id, class: k.status },
        el('td', null, el('code', { text: k.id })),
        el('td', { text: k.name || '—' }),
        el('td', null, el('span', { class: 'pill', text: k.status })),
        el('td', { class: 'opt', text: fmtTime(k.created_at) }),
        el('td', { class: 'num', text: k.daily_limit === null ? 'none' : fmtUSD(k.daily_limit) }),
        el('td', { class: 'num', text: k.monthly_limit === null ? 'none' : fmtUSD(k.monthly_limit) }),
        el('td', { class: 'num opt2', text: rate(k.rpm) + ' / ' + rate(k.tpm) }),
        el('td', { class: 'opt', text: k.expires_at ? fmtTime(k.expires_at) : 'never' }));
      if (write) tr.append(actions);
      return tr;
    }));
    $('keys-empty').hidden = keys.length > 0;
  }

  function renderCredits(page, append) {
    const rows = page.data.map((t) => el('tr', { 'data-id': t.id },
      el('td', { title: t.created_at, text: fmtTime(t.created_at) }),
      el('td', { class: 'num' + (Number(t.amount) < 0 ? ' neg' : ''), title: t.amount + ' USD', text: fmtUSD(t.amount) }),
      el('td', { class: 'num', text: fmtUSD(t.balance_after) }),
      el('td', { text: t.reference || '—' }),
      el('td', { class: 'opt', text: t.note || '—' }),
      el('td', { class: 'opt', text: t.actor || '—' })));
    if (append) $('credits-body').append(...rows);
    else $('credits-body').replaceChildren(...rows);
    $('credits-empty').hidden = $('credits-body').children.length > 0;
    state.creditsCursor = page.next_cursor;
    $('credits-more').hidden = !page.has_more;
  }

  function usageQuery(name) {
    const r = lastDays(Number($('range').value));
    return '/usage?' + new URLSearchParams({ group_by: 'day', account: name, start_date: r.start, end_date: r.end });
  }


  function chartData() {
    const u = state.usage;
    const end = isoDay(new Date(Date.parse(u.end_date) - DAY_MS));
    const days = [];
    for (let t = parseDay(u.start_date.slice(0, 10)).getTime(); t <= parseDay(end).getTime(); t += DAY_MS) days.push(isoDay(new Date(t)));
    const index = new Map(days.map((d, i) => [d, i]));
    const values = days.map(() => 0);
    for (const row of u.data) {
      if (index.has(row.bucket)) values[index.get(row.bucket)] = state.metric === 'cost' ? Number(row.cost) : row.requests;
    }
    return { days, xs: days.map((d) => parseDay(d).getTime() / 1000), values };
  }

  function drawChart() {
    const u = state.usage;
    setText('total-cost', fmtUSD(u.total.cost), u.total.cost + ' USD');
    setText('total-requests', fmtInt(u.total.requests));
    setText('total-input', fmtInt(u.total.input_tokens));
    setText('total-output', fmtInt(u.total.output_tokens));
    $('chart-empty').hidden = u.total.requests > 0;
    const box = $('chart');
    if (state.chart) { state.chart.destroy(); state.chart = null; }
    const { days, xs, values } = chartData();
    const muted = cssVar('--muted');
    const grid = cssVar('--grid');
    const color = cssVar('--s0');
    const font = '12px system-ui, "DejaVu Sans", sans-serif';
    const cost = state.metric === 'cost';
    const opts = {
      width: box.clientWidth,
      height: box.clientHeight,
      tzDate: (ts) => uPlot.tzDate(new Date(ts * 1000), 'Etc/UTC'),
      legend: { show: false },
      cursor: { y: false, points: { show: false }, drag: { x: false, y: false, setScale: false } },
      scales: {
        x: { time: true, range: (_, min, max) => [min - DAY_MS / 2000, max + DAY_MS / 2000] },
        y: { range: (_, min, max) => [0, max > 0 ? max * 1.08 : 1] },
      },
      axes: [
        { stroke: muted, font, grid: { show: false }, ticks: { stroke: grid } },
        { stroke: muted, font, size: 70, grid: { stroke: grid, width: 1 }, ticks: { show: false },
          values: (_, vals) => vals.map((v) => (cost ? fmtAxisUSD(v) : fmtInt(v))) },
      ],
      series: [{}, { label: cost ? 'Spend' : 'Requests', fill: color, stroke: color, width: 0,
        paths: uPlot.paths.bars({ size: [0.72, 48], gap: 1 }), points: { show: false } }],
      hooks: { setCursor: [(p) => {
        const i = p.cursor.idx;
        setText('readout', i === null || i === undefined
          ? 'Point at a day for its figures.'
          : dayFmt.format(parseDay(days[i])) + ': ' + (cost ? fmtUSD(values[i].toFixed(6)) : fmtInt(values[i])));
      }] },
    };
    state.chart = new uPlot(opts, [xs, values], box);
    setText('readout', 'Point at a day for its figures.');
  }

  async function reloadUsage() {
    const card = $('usage');
    card.setAttribute('aria-busy', 'true');
    try {
      state.usage = await api(usageQuery(state.account.name));
      drawChart();
    } catch (err) {
      fail(err);
    } finally {
      card.removeAttribute('aria-busy');
    }
  }

  async function refreshAccount() {
    const n = enc(state.account.name);
    const [account, keys, credits] = await Promise.all([
      api('/accounts/' + n), api('/accounts/' + n + '/keys'), api('/accounts/' + n + '/credits?limit=' + PAGE_SIZE),
    ]);
    state.account = account;
    renderAccount(account);
    renderKeys(keys.data);
    renderCredits(credits, false);
  }

  // ---- changes (absent for a read-only token) ----

  // amountOrNull reads a money field: null when empty.
  const amountOrNull = (id) => ($(id).value.trim() === '' ? null : $(id).value.trim());

  function rateOrNull(id) {
    const v = $(id).value.trim();
    if (v === '') return null;
    if (!/^\d+$/.test(v)) throw new Error('a rate limit is a whole number');
    return Number(v);
  }

  async function createAccount(e) {
    e.preventDefault();
    const body = { name: $('na-name').value.trim() };
    const credits = amountOrNull('na-credits');
    if (credits !== null) body.credits = credits;
    setStatus('na-status', 'Creating…');
    try {
      const a = await api('/accounts', { method: 'POST', body: JSON.stringify(body) });
      $('new-account').reset();
      setStatus('na-status', 'Created ' + a.name + '.', 'ok');
      location.hash = 'account=' + enc(a.name);
    } catch (err) {
      fail(err, 'na-status');
    }
  }

  async function saveCaps(e) {
    e.preventDefault();
    let body;
    try {
      body = {
        daily_cap: amountOrNull('cap-daily'), monthly_cap: amountOrNull('cap-monthly'),
        rpm: rateOrNull('cap-rpm'), tpm: rateOrNull('cap-tpm'),
      };
    } catch (err) {
      setStatus('caps-status', err.message, 'err');
      return;
    }
    setStatus('caps-status', 'Saving…');
    try {
      const a = await api('/accounts/' + enc(state.account.name), { method: 'PATCH', body: JSON.stringify(body) });
      state.account = a;
      renderAccount(a);
      setStatus('caps-status', 'Saved.', 'ok');
    } catch (err) {
      fail(err, 'caps-status');
    }
  }

  async function createKey(e) {
    e.preventDefault();
    const body = { name: $('nk-name').value.trim() };
    for (const [f, id] of [['daily_limit', 'nk-daily'], ['monthly_limit', 'nk-monthly']]) {
      const v = amountOrNull(id);
      if (v !== null) body[f] = v;
    }
    setStatus('nk-status', 'Creating…');
    try {
      const k = await api('/accounts/' + enc(state.account.name) + '/keys', { method: 'POST', body: JSON.stringify(body) });
      $('new-key').reset();
      setStatus('nk-status', 'Created ' + k.id + '.', 'ok');
      setText('secret-value', k.key);
      $('secret').hidden = false;
      await refreshAccount();
    } catch (err) {
      fail(err, 'nk-status');
    }
  }

  async function revokeKey(k, button) {
    if (!confirm('Revoke key ' + k.id + (k.name ? ' (' + k.name + ')' : '') + '? Calls with it are refused from now on.')) return;
    button.disabled = true;
    try {
      await api('/keys/' + enc(k.id), { method: 'DELETE' });
      setStatus('nk-status', 'Revoked ' + k.id + '.', 'ok');
      await refreshAccount();
    } catch (err) {
      button.disabled = false;
      fail(err, 'nk-status');
    }
  }

  function openLimits(k) {
    state.limitsKey = k;
    setText('limits-id', k.id + (k.name ? ' · ' + k.name : ''));
    $('kl-daily').value = k.daily_limit === null ? '' : trimUSD(k.daily_limit);
    $('kl-monthly').value = k.monthly_limit === null ? '' : trimUSD(k.monthly_limit);
    $('kl-rpm').value = k.rpm === null ? '' : String(k.rpm);
    $('kl-tpm').value = k.tpm === null ? '' : String(k.tpm);
    setStatus('kl-status', '');
    $('limits').showModal();
  }

  async function saveLimits(e) {
    e.preventDefault();
    let body;
    try {
      body = { daily_limit: amountOrNull('kl-daily'), monthly_limit: amountOrNull('kl-monthly'), rpm: rateOrNull('kl-rpm'), tpm: rateOrNull('kl-tpm') };
    } catch (err) {
      setStatus('kl-status', err.message, 'err');
      return;
    }
    setStatus('kl-status', 'Saving…');
    try {
      await api('/keys/' + enc(state.limitsKey.id), { method: 'PATCH', body: JSON.stringify(body) });
      $('limits').close();
      await refreshAccount();
    } catch (err) {
      fail(err, 'kl-status');
    }
  }

  // addCredits sends the form's entry with its Idempotency-Key. Every
  // submit of the same entry — a double click, Enter pressed twice, a
  // retry after a network error — sends the same key, so the gateway
  // credits it once; the key changes only when the entry does or once it
  // has been credited.
  async function addCredits(e) {
    e.preventDefault();
    const body = { amount: $('cr-amount').value.trim() };
    const ref = $('cr-ref').value.trim();
    const note = $('cr-note').value.trim();
    if (ref) body.reference = ref;
    if (note) body.note = note;
    const idem = state.creditIdem;
    $('cr-submit').disabled = true;
    setStatus('cr-status', 'Adding…');
    try {
      const { body: res, replayed } = await call(API + '/accounts/' + enc(state.account.name) + '/credits', {
        method: 'POST', body: JSON.stringify(body), headers: { 'Idempotency-Key': idem },
      });
      if (state.creditIdem === idem) {
        state.creditIdem = newIdempotencyKey();
        $('credit-form').reset();
      }
      setStatus('cr-status', (replayed ? 'Already credited (the same submit, counted once): ' : 'Credited ') +
        fmtUSD(res.transaction.amount) + '; balance ' + fmtUSD(res.balance) + '.', 'ok');
      await refreshAccount();
    } catch (err) {
      fail(err, 'cr-status');
    } finally {
      $('cr-submit').disabled = false;
    }
  }

  // ---- the audit log ----

  async function showAudit(seq) {
    const page = await api('/audit?limit=' + PAGE_SIZE);
    if (seq !== state.seq) return;
    renderAudit(page, false);
  }

  // change shows an entry's before and after, field by field where both
  // are objects.
  function change(before, after) {
    const td = el('td', { class: 'change' });
    const show = (v) => (typeof v === 'string' ? v : JSON.stringify(v));
    if (before && after && typeof before === 'object' && typeof after === 'object') {
      const keys = [...new Set([...Object.keys(before), ...Object.keys(after)])];
      const parts = [];
      for (const k of keys) {
        if (JSON.stringify(before[k]) === JSON.stringify(after[k])) continue;
        parts.push(el('span', null, k + ': ', el('del', { text: show(before[k] ?? null) }), ' → ', el('ins', { text: show(after[k] ?? null) }), '; '));
      }
      td.append(...(parts.length ? parts : ['no change']));
      return td;
    }
    if (before !== null && before !== undefined) td.append(el('del', { text: show(before) }), ' → ');
    td.append(after === null || after === undefined ? el('span', { class: 'muted', text: '(none)' }) : el('ins', { text: show(after) }));
    return td;
  }

  function renderAudit(page, append) {
    const rows = page.data.map((e) => el('tr', { 'data-id': e.id },
      el('td', { title: e.created_at, text: fmtTime(e.created_at) }),
      el('td', { text: e.actor }),
      el('td', null, el('span', { class: 'pill', text: e.action })),
      el('td', { text: e.target }),
      change(e.before, e.after)));
    if (append) $('audit-body').append(...rows);
    else $('audit-body').replaceChildren(...rows);
    $('audit-empty').hidden = $('audit-body').children.length > 0;
    state.auditCursor = page.next_cursor;
    $('audit-more').hidden = !page.has_more;
  }

  // ---- wiring ----

  function on(id, event, fn) {
    const e = $(id);
    if (e) e.addEventListener(event, fn);
  }

  function init() {
    on('signin-form', 'submit', (e) => {
      e.preventDefault();
      const token = $('token').value.trim();
      if (!token) {
        showSignIn('Paste an admin token.');
        return;
      }
      signIn(token, false);
    });
    on('sign-out', 'click', () => signedOut(''));
    on('banner-retry', 'click', () => route());
    window.addEventListener('hashchange', () => route());

    on('acc-next', 'click', async () => {
      state.accountCursors.push($('acc-next').dataset.cursor);
      try { renderAccounts(await loadAccounts()); } catch (err) { state.accountCursors.pop(); fail(err); }
    });
    on('acc-first', 'click', async () => {
      state.accountCursors = [''];
      try { renderAccounts(await loadAccounts()); } catch (err) { fail(err); }
    });
    on('top-range', 'change', () => {
      const custom = $('top-range').value === 'custom';
      $('top-custom').hidden = !custom;
      if (custom && !$('top-start').value) {
        const r = lastDays(30);
        $('top-start').value = r.start;
        $('top-end').value = r.end;
      }
      reloadTop();
    });
    on('top-start', 'change', reloadTop);
    on('top-end', 'change', reloadTop);

    on('range', 'change', reloadUsage);
    for (const b of document.querySelectorAll('[data-metric]')) {
      b.addEventListener('click', () => {
        state.metric = b.dataset.metric;
        for (const o of document.querySelectorAll('[data-metric]')) o.setAttribute('aria-pressed', String(o === b));
        drawChart();
      });
    }
    window.addEventListener('resize', () => { if (state.view === 'account' && state.usage) drawChart(); });

    on('new-account', 'submit', createAccount);
    on('caps-form', 'submit', saveCaps);
    on('new-key', 'submit', createKey);
    on('secret-copy', 'click', async () => {
      try { await navigator.clipboard.writeText($('secret-value').textContent); setText('secret-copy', 'Copied'); } catch (_) { /* the text stays selectable */ }
    });
    on('secret-done', 'click', () => { $('secret').hidden = true; setText('secret-value', ''); setText('secret-copy', 'Copy'); });
    on('limits-form', 'submit', saveLimits);
    on('credit-form', 'submit', addCredits);
    // A changed entry is another credit: it gets a key of its own.
    on('credit-form', 'input', () => { state.creditIdem = newIdempotencyKey(); });
    on('credits-more', 'click', async () => {
      try { renderCredits(await api('/accounts/' + enc(state.account.name) + '/credits?' + new URLSearchParams({ limit: String(PAGE_SIZE), cursor: state.creditsCursor })), true); } catch (err) { fail(err); }
    });
    on('audit-more', 'click', async () => {
      try { renderAudit(await api('/audit?' + new URLSearchParams({ limit: String(PAGE_SIZE), cursor: state.auditCursor })), true); } catch (err) { fail(err); }
    });

    const saved = sessionStorage.getItem(TOKEN_STORAGE);
    if (saved) signIn(saved, true);
    else showSignIn('');
  }

  init();
})();
