// The embeddings clients against svcgw: the openai package's
// embeddings.create (its default, which asks for base64 and decodes it;
// float; base64 as a string; dimensions), @google/genai's
// models.embedContent (one text and a batch), LangChain's OpenAIEmbeddings
// and GoogleGenerativeAIEmbeddings (embedQuery, embedDocuments) and the AI
// SDK's embed and embedMany with @ai-sdk/openai and @ai-sdk/google.
//
// Every call goes through a recording proxy of scripts/clients/embedup in
// front of svcgw, which keeps each byte svcgw sends the client: no reply
// may hold a backend string (upstream name, backend model, the upstream's
// address or markers). Each call is then charged as its generation record
// says: its input tokens at the configured price (1 USD per million, so a
// token is a micro-dollar), taken from the balance.
//
// EMBED_UPSTREAM says what svcgw routes embeddings to:
//   fixture  the fixture: vectors of unit length, 1536 (OpenAI) and 768
//            (Gemini) values by default, the same text the same vector on
//            both surfaces; charged on svcgw's count;
//   openai   embedup's OpenAI-protocol upstream (POST /v1/embeddings);
//   gemini   embedup's Gemini-protocol upstream (:embedContent,
//            :batchEmbedContents).
// Against an upstream, each call must reach it as exactly one request of
// the bytes svcgw's translation makes of the client's request, with the
// upstream's key and never the caller's; the client must get the vectors
// the upstream sent, value for value; the charge is the upstream's
// usage.prompt_tokens (OpenAI) or svcgw's count (Gemini reports none).
//
// Env: SVCGW_URL (http://127.0.0.1:PORT), SVCGW_API_KEY, EMBED_RECORDER
// (embedup's address), EMBED_UPSTREAM, EMBED_PROMPT_TOKENS (what the
// OpenAI upstream reports); EMBED_VERBOSE=1 prints each call's request and
// what svcgw sent upstream.
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { GoogleGenAI } from '@google/genai';
import { OpenAIEmbeddings } from '@langchain/openai';
import { GoogleGenerativeAIEmbeddings } from '@langchain/google-genai';
import { embed, embedMany } from 'ai';
import { createOpenAI } from '@ai-sdk/openai';
import { createGoogleGenerativeAI } from '@ai-sdk/google';

const gw = process.env.SVCGW_URL, apiKey = process.env.SVCGW_API_KEY, recorder = process.env.EMBED_RECORDER;
const mode = process.env.EMBED_UPSTREAM || 'fixture';
const reported = Number(process.env.EMBED_PROMPT_TOKENS || 17);
const OA_MODEL = 'backend-embed-oa', GM_MODEL = 'backend-embed-gm'; // verify.sh's configuration
const OA_KEY = 'sk-upstream-oa', GM_KEY = 'gm-upstream-key';
assert.ok(['fixture', 'openai', 'gemini'].includes(mode), `EMBED_UPSTREAM ${mode}`);

const json = async (res) => {
  assert.ok(res.ok, `${res.url}: ${res.status} ${await res.clone().text()}`);
  return res.json();
};
const { url: base } = await json(await fetch(`${recorder}/_rec/proxy?target=${encodeURIComponent(gw)}`, { method: 'POST' }));
const take = async (what) => (await json(await fetch(`${recorder}/_rec/${what}`))) ?? [];
const tokens = async (texts, title = '') =>
  (await json(await fetch(`${recorder}/_rec/tokens`, { method: 'POST', body: JSON.stringify({ texts, title }) }))).tokens;
const svc = async (path) => json(await fetch(`${gw}${path}`, { headers: { Authorization: `Bearer ${apiKey}` } }));
const micros = (usd) => Math.round(Number(usd) * 1e6);

// What the client's request becomes upstream, as svcgw translates it: one
// request, the backend's model, svcgw's own key order, each input one
// user content of one text part on Gemini; taskType and title are
// Gemini's alone, encoding_format the caller's when it called in OpenAI's
// shape and asked for base64 (the upstream's base64 then passes through),
// else float.
function expectedUpstream(path, body) {
  const req = JSON.parse(body);
  let texts, dims, taskType, title, user;
  if (path.endsWith('/embeddings')) {
    texts = typeof req.input === 'string' ? [req.input] : req.input;
    assert.ok(texts.every((t) => typeof t === 'string'), `the client sent token ids: ${body}`);
    ({ dimensions: dims, user } = req);
  } else {
    const reqs = path.includes(':batchEmbedContents') ? req.requests : [req];
    texts = reqs.map((r) => r.content.parts.map((p) => p.text).join('\n'));
    ({ taskType, title, outputDimensionality: dims } = reqs[0]);
  }
  if (mode === 'openai') {
    const up = { model: OA_MODEL, input: texts };
    if (dims !== undefined) up.dimensions = dims;
    up.encoding_format = path.endsWith('/embeddings') && req.encoding_format === 'base64' ? 'base64' : 'float';
    if (user) up.user = user;
    return { path: '/v1/embeddings', body: JSON.stringify(up), auth: ['authorization', `Bearer ${OA_KEY}`], texts, title: '' };
  }
  const one = (text) => {
    const r = { model: `models/${GM_MODEL}`, content: { role: 'user', parts: [{ text }] } };
    if (taskType) r.taskType = taskType;
    if (title) r.title = title;
    if (dims !== undefined) r.outputDimensionality = dims;
    return r;
  };
  return texts.length === 1
    ? { path: `/v1beta/models/${GM_MODEL}:embedContent`, body: JSON.stringify(one(texts[0])), auth: ['x-goog-api-key', GM_KEY], texts, title }
    : { path: `/v1beta/models/${GM_MODEL}:batchEmbedContents`, body: JSON.stringify({ requests: texts.map(one) }), auth: ['x-goog-api-key', GM_KEY], texts, title };
}

// fromBase64 is the float32 values of OpenAI's encoding_format "base64".
const fromBase64 = (b64) => {
  const bytes = Uint8Array.from(Buffer.from(b64, 'base64')); // a copy: aligned for Float32Array
  return Array.from(new Float32Array(bytes.buffer));
};

// The vectors of an upstream reply, in order.
function upstreamVectors(reply) {
  const r = JSON.parse(reply);
  if (r.data) return r.data.map((d) => (typeof d.embedding === 'string' ? fromBase64(d.embedding) : d.embedding));
  if (r.embeddings) return r.embeddings.map((e) => e.values);
  return [r.embedding.values];
}

// check runs one client call (returning the vectors it got) and holds
// svcgw to everything above; it returns the vectors.
async function check(name, call, { calls = 1, dims } = {}) {
  await take('upstream');
  await take('responses');
  const before = await svc('/svc/v1/credits');
  const vectors = await call();
  const exchanges = await take('responses');
  const upstream = await take('upstream');
  assert.equal(exchanges.length, calls, `${name}: ${exchanges.length} calls reached svcgw`);
  for (const ex of exchanges) {
    assert.equal(ex.status, 200, `${name}: ${ex.path}: ${ex.status} ${ex.body}`);
    assert.deepEqual(ex.leaks, [], `${name}: the client received ${ex.leaks.join(', ')}:\n${JSON.stringify(ex.header)}\n${ex.body.slice(0, 500)}`);
    assert.equal(ex.header['X-Svc-Request-Type']?.[0], 'embedding');
  }
  if (dims) vectors.forEach((v, i) => assert.equal(v.length, dims, `${name}: vector ${i}`));

  let charged = 0;
  if (mode === 'fixture') {
    assert.equal(upstream.length, 0);
    for (const ex of exchanges) charged += await fixtureTokens(ex);
  } else {
    // One upstream request a call, of the bytes svcgw's translation makes.
    assert.equal(upstream.length, exchanges.length, `${name}: ${upstream.length} requests upstream for ${exchanges.length} calls`);
    const got = [];
    for (let i = 0; i < exchanges.length; i++) {
      const want = expectedUpstream(exchanges[i].path.split('?')[0], exchanges[i].request_body);
      const up = upstream[i];
      assert.equal(up.method, 'POST');
      assert.equal(up.path, want.path, `${name}: upstream path`);
      assert.equal(up.body, want.body, `${name}: upstream body`);
      const [h, v] = want.auth;
      const header = Object.fromEntries(Object.entries(up.header).map(([k, vs]) => [k.toLowerCase(), vs.join(', ')]));
      assert.equal(header[h], v, `${name}: upstream ${h}`);
      assert.ok(!JSON.stringify(up).includes(apiKey), `${name}: the caller's key went upstream`);
      got.push(...upstreamVectors(up.reply));
      if (process.env.EMBED_VERBOSE) console.log(`  ${name}: ${exchanges[i].path} ${exchanges[i].request_body.slice(0, 200)}\n    → ${up.path} ${up.body.slice(0, 200)}`);
      charged += mode === 'openai' ? reported : await tokens(want.texts, want.title);
    }
    // The client's vectors are the upstream's, value for value.
    assert.equal(vectors.length, got.length, `${name}: ${vectors.length} vectors for ${got.length} sent`);
    vectors.forEach((v, i) => {
      assert.equal(v.length, got[i].length, `${name}: vector ${i} has ${v.length} values, the upstream sent ${got[i].length}`);
      for (let j = 0; j < v.length; j++) assert.equal(Math.fround(v[j]), got[i][j], `${name}: vector ${i}[${j}]`);
    });
  }

  // The charge, call by call, and in all from the balance.
  let cost = 0;
  for (const ex of exchanges) {
    const id = ex.header['X-Svc-Generation-Id']?.[0];
    assert.ok(id, `${name}: no X-SVC-Generation-Id`);
    const g = (await svc(`/svc/v1/generation?id=${id}`)).data;
    assert.equal(g.request_type, 'embedding');
    assert.equal(g.streamed, false);
    assert.equal(g.usage.completion_tokens, 0);
    cost += micros(g.total_cost);
    ex.generation = g;
  }
  const prompt = exchanges.reduce((s, ex) => s + ex.generation.usage.prompt_tokens, 0);
  assert.equal(prompt, charged, `${name}: charged ${prompt} tokens, expected ${charged}`);
  assert.equal(cost, charged, `${name}: cost ${cost} µUSD for ${charged} tokens at 1 USD per million`);
  const after = await svc('/svc/v1/credits');
  assert.equal(micros(before.balance) - micros(after.balance), cost, `${name}: balance ${before.balance} → ${after.balance}`);
  return { vectors, tokens: charged };
}

// The fixture charges svcgw's count of the request's inputs.
async function fixtureTokens(ex) {
  const req = JSON.parse(ex.request_body);
  if (ex.path.includes('/embeddings')) return tokens(typeof req.input === 'string' ? [req.input] : req.input);
  const reqs = ex.path.includes(':batchEmbedContents') ? req.requests : [req];
  return tokens(reqs.map((r) => r.content.parts.map((p) => p.text).join('\n')), reqs[0].title || '');
}

const docs = ['The cat sat on the mat.', 'Quarterly revenue grew four percent.', 'Photosynthesis turns light into energy.'];
const norm = (v) => Math.sqrt(v.reduce((s, x) => s + x * x, 0));
const unit = (vs, what) => vs.forEach((v, i) => assert.ok(Math.abs(norm(v) - 1) < 1e-5, `${what} ${i}: norm ${norm(v)}`));
const fixture = mode === 'fixture';
// The default size of a vector: the fixture's per surface, else the upstream's.
const size = (surface) => (fixture ? { openai: 1536, gemini: 768 }[surface] : { openai: 1536, gemini: 3072 }[mode]);
const label = `[${mode}]`;

// The openai package.
const openai = new OpenAI({ baseURL: `${base}/svc/v1`, apiKey, maxRetries: 0 });
const dflt = await check('openai default', async () => {
  const r = await openai.embeddings.create({ model: 'text-embedding-3-small', input: docs });
  assert.equal(r.object, 'list');
  assert.equal(r.model, 'text-embedding-3-small'); // the caller's id, echoed
  r.data.forEach((d, i) => assert.equal(d.index, i));
  assert.ok(r.usage.prompt_tokens > 0 && r.usage.total_tokens === r.usage.prompt_tokens);
  return r.data.map((d) => d.embedding);
}, { dims: size('openai') });
assert.equal(dflt.vectors.length, docs.length);
if (fixture) unit(dflt.vectors, 'openai default');
const float = await check('openai float', async () =>
  (await openai.embeddings.create({ model: 'text-embedding-3-small', input: docs, encoding_format: 'float' })).data.map((d) => d.embedding));
float.vectors.forEach((v, i) => v.forEach((x, j) => assert.equal(Math.fround(x), dflt.vectors[i][j])));
const b64 = await check('openai base64', async () => {
  const r = await openai.embeddings.create({ model: 'text-embedding-3-small', input: docs[0], encoding_format: 'base64' });
  assert.equal(typeof r.data[0].embedding, 'string'); // returned as sent when asked for explicitly
  const raw = Buffer.from(r.data[0].embedding, 'base64');
  return [Array.from(new Float32Array(raw.buffer, raw.byteOffset, raw.length / 4))];
}, { dims: size('openai') });
assert.deepEqual(b64.vectors[0], dflt.vectors[0]);
const dims = await check('openai dimensions', async () => {
  const r = await openai.embeddings.create({ model: 'any-embedding-model', input: docs.slice(0, 2), dimensions: 256, encoding_format: 'float' });
  assert.equal(r.model, 'any-embedding-model');
  return r.data.map((d) => d.embedding);
}, { dims: 256 });
if (fixture) unit(dims.vectors, 'openai dimensions');
console.log(`${label} openai embeddings.create: default (base64, decoded), float, base64, dimensions: ok`);

// @google/genai.
const genai = new GoogleGenAI({ apiKey, httpOptions: { baseUrl: `${base}/svc` } });
const single = await check('genai single', async () =>
  (await genai.models.embedContent({ model: 'gemini-embedding-001', contents: docs[0] })).embeddings.map((e) => e.values), { dims: size('gemini') });
assert.equal(single.vectors.length, 1);
if (fixture) unit(single.vectors, 'genai single');
const batch = await check('genai batch', async () => (await genai.models.embedContent({
  model: 'gemini-embedding-001', contents: docs,
  config: { taskType: 'RETRIEVAL_DOCUMENT', outputDimensionality: 256 },
})).embeddings.map((e) => e.values), { dims: 256 });
assert.equal(batch.vectors.length, docs.length);
if (fixture) {
  // The same text, the same vector, on both surfaces.
  dims.vectors.forEach((v, i) => v.forEach((x, j) => assert.ok(Math.abs(x - batch.vectors[i][j]) < 1e-6)));
}
console.log(`${label} @google/genai models.embedContent: single, batch (taskType, outputDimensionality): ok`);

// LangChain, as its vector stores call it.
const lc = {
  openai: new OpenAIEmbeddings({ model: 'text-embedding-3-small', apiKey, configuration: { baseURL: `${base}/svc/v1` }, maxRetries: 0 }),
  google: new GoogleGenerativeAIEmbeddings({ model: 'gemini-embedding-001', apiKey, baseUrl: `${base}/svc`, maxRetries: 0 }),
};
for (const [name, e] of Object.entries(lc)) {
  const surface = name === 'openai' ? 'openai' : 'gemini';
  const q = await check(`langchain ${name} embedQuery`, async () => [await e.embedQuery(docs[0])], { dims: size(surface) });
  const d = await check(`langchain ${name} embedDocuments`, async () => e.embedDocuments(docs.slice(0, 2)), { dims: size(surface) });
  assert.equal(d.vectors.length, 2);
  if (fixture) unit([...q.vectors, ...d.vectors], `langchain ${name}`);
  console.log(`${label} langchain ${name}: embedQuery, embedDocuments (${q.vectors[0].length} dimensions): ok`);
}

// The AI SDK.
const aisdk = {
  openai: createOpenAI({ baseURL: `${base}/svc/v1`, apiKey }).textEmbeddingModel('text-embedding-3-small'),
  google: createGoogleGenerativeAI({ baseURL: `${base}/svc/v1beta`, apiKey }).textEmbeddingModel('gemini-embedding-001'),
};
const providerOptions = { openai: { dimensions: 256 }, google: { outputDimensionality: 256 } };
const vectors = {};
for (const [name, model] of Object.entries(aisdk)) {
  const one = await check(`ai-sdk ${name} embed`, async () =>
    [(await embed({ model, value: docs[0], maxRetries: 0, providerOptions })).embedding], { dims: 256 });
  const many = await check(`ai-sdk ${name} embedMany`, async () => {
    const r = await embedMany({ model, values: docs, maxRetries: 0, providerOptions });
    if (name === 'openai') assert.ok(r.usage.tokens > 0);
    return r.embeddings;
  }, { dims: 256 });
  assert.equal(many.vectors.length, docs.length);
  assert.deepEqual(many.vectors[0], one.vectors[0]); // the same text, the same vector
  vectors[name] = many.vectors;
  console.log(`${label} ai-sdk ${name}: embed, embedMany (${docs.length} texts): ok`);
}
if (fixture) {
  vectors.openai.forEach((v, i) => v.forEach((x, j) => assert.ok(Math.abs(x - vectors.google[i][j]) < 1e-6)));
  console.log(`${label} ai-sdk: the same vectors through both surfaces: ok`);
}
console.log(`${label} every reply free of backend strings, every call charged as recorded: ok`);
