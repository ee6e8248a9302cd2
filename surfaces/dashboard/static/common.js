// svcgw pages' shared helpers, for the key holder's dashboard (app.js) and
// the operator's page (operator.js): plain JavaScript, no build step,
// loaded before either as window.svcgwPage.
window.svcgwPage = (() => {
  'use strict';

  const $ = (id) => document.getElementById(id);

  function cssVar(name) {
    return getComputedStyle(document.documentElement).getPropertyValue(name).trim();
  }

  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === 'class') e.className = v;
      else if (k === 'text') e.textContent = v;
      else e.setAttribute(k, v === true ? '' : v);
    }
    for (const c of children) {
      if (c !== null && c !== undefined) e.append(c);
    }
    return e;
  }

  function fmtAxisUSD(v) {
    if (v === 0) return '$0';
    if (Math.abs(v) >= 1) return '$' + v.toLocaleString('en-US', { maximumFractionDigits: 2 });
    return '$' + Number(v.toPrecision(2));
  }

  function setText(id, text, title) {
    const e = $(id);
    e.textContent = text;
    if (title !== undefined) e.title = title;
  }

  function showBanner(message) {
    setText('banner-text', message);
    $('banner').hidden = false;
  }

  function utcToday() {
    const now = new Date();
    return new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate()));
  }

  return Object.freeze({ $, cssVar, el, fmtAxisUSD, setText, showBanner, utcToday });
})();
