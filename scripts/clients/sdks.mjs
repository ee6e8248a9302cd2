// The vendors' own Node SDKs against svcgw's embeddings endpoints: the
// openai package's embeddings.create (its default, which asks for base64
// and decodes it; float; base64 as a string; dimensions) and
// @google/genai's models.embedContent (one text and a batch). Env:
// SVCGW_URL (http://127.0.0.1:PORT), SVCGW_API_KEY.
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { GoogleGenAI } from '@google/genai';

const base = process.env.SVCGW_URL, apiKey = process.env.SVCGW_API_KEY;
const docs = ['The cat sat on the mat.', 'Quarterly revenue grew four percent.', 'Photosynthesis turns light into energy.'];
const norm = (v) => Math.sqrt(v.reduce((s, x) => s + x * x, 0));
const unit = (v, what) => assert.ok(Math.abs(norm(v) - 1) < 1e-5, `${what}: norm ${norm(v)}`);

const openai = new OpenAI({ baseURL: `${base}/svc/v1`, apiKey, maxRetries: 0 });
// The SDK's default: it asks for base64 and decodes the float32s itself.
const dflt = await openai.embeddings.create({ model: 'text-embedding-3-small', input: docs });
assert.equal(dflt.object, 'list');
assert.equal(dflt.model, 'text-embedding-3-small'); // the caller's id, echoed
assert.equal(dflt.data.length, docs.length);
dflt.data.forEach((d, i) => {
  assert.equal(d.index, i);
  assert.equal(d.embedding.length, 1536);
  unit(d.embedding, `openai default ${i}`);
});
assert.ok(dflt.usage.prompt_tokens > 0 && dflt.usage.total_tokens === dflt.usage.prompt_tokens);

const float = await openai.embeddings.create({ model: 'text-embedding-3-small', input: docs, encoding_format: 'float' });
float.data.forEach((d, i) => {
  for (let j = 0; j < d.embedding.length; j++) assert.equal(Math.fround(d.embedding[j]), dflt.data[i].embedding[j]);
});

const b64 = await openai.embeddings.create({ model: 'text-embedding-3-small', input: docs[0], encoding_format: 'base64' });
assert.equal(typeof b64.data[0].embedding, 'string'); // returned as sent when asked for explicitly
const raw = Buffer.from(b64.data[0].embedding, 'base64');
assert.equal(raw.length, 4 * 1536);
const decoded = Array.from(new Float32Array(raw.buffer, raw.byteOffset, raw.length / 4));
assert.deepEqual(decoded, dflt.data[0].embedding);

const dims = await openai.embeddings.create({ model: 'any-embedding-model', input: docs.slice(0, 2), dimensions: 256, encoding_format: 'float' });
assert.equal(dims.model, 'any-embedding-model');
dims.data.forEach((d, i) => {
  assert.equal(d.embedding.length, 256);
  unit(d.embedding, `openai dimensions ${i}`);
});
console.log('openai embeddings.create: default (base64, decoded), float, base64, dimensions: ok');

const genai = new GoogleGenAI({ apiKey, httpOptions: { baseUrl: `${base}/svc` } });
const single = await genai.models.embedContent({ model: 'gemini-embedding-001', contents: docs[0] });
assert.equal(single.embeddings.length, 1);
assert.equal(single.embeddings[0].values.length, 768);
unit(single.embeddings[0].values, 'genai single');
const batch = await genai.models.embedContent({
  model: 'gemini-embedding-001', contents: docs,
  config: { taskType: 'RETRIEVAL_DOCUMENT', outputDimensionality: 256 },
});
assert.equal(batch.embeddings.length, docs.length);
batch.embeddings.forEach((e, i) => assert.equal(e.values.length, 256, `genai batch ${i}`));
// The same text, the same vector, on both surfaces.
dims.data.forEach((d, i) => {
  for (let j = 0; j < 256; j++) assert.ok(Math.abs(d.embedding[j] - batch.embeddings[i].values[j]) < 1e-6);
});
assert.ok(Math.abs(batch.embeddings[0].values.reduce((s, x, j) => s + x * batch.embeddings[1].values[j], 0)) < 0.5);
console.log('@google/genai models.embedContent: single, batch (taskType, outputDimensionality): ok');
