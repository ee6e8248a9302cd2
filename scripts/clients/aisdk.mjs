// The AI SDK against svcgw: one prompt and one tool turn per provider, each
// provider with its defaults (the OpenAI provider uses the Responses API,
// store unset), streamed and not, and a second turn that replays the first.
// Env: SVCGW_URL (http://127.0.0.1:PORT), SVCGW_API_KEY.
import assert from 'node:assert/strict';
import { generateText, streamText, tool, stepCountIs } from 'ai';
import { createOpenAI } from '@ai-sdk/openai';
import { createAnthropic } from '@ai-sdk/anthropic';
import { createGoogleGenerativeAI } from '@ai-sdk/google';
import { z } from 'zod';

const base = process.env.SVCGW_URL, apiKey = process.env.SVCGW_API_KEY;
const providers = {
  openai: createOpenAI({ baseURL: `${base}/svc/v1`, apiKey })('gpt-5'),
  anthropic: createAnthropic({ baseURL: `${base}/svc/v1`, apiKey })('claude-sonnet-4-5'),
  google: createGoogleGenerativeAI({ baseURL: `${base}/svc/v1beta`, apiKey })('gemini-2.5-flash'),
};
const weather = tool({
  description: 'Current weather of a city',
  inputSchema: z.object({ city: z.string() }),
  execute: async ({ city }) => ({ city, sky: 'sunny' }),
});

for (const [name, model] of Object.entries(providers)) {
  // A prompt, then a second turn that replays the first answer (the
  // OpenAI provider replays it by item id).
  const first = await generateText({ model, prompt: 'My name is Ada.', maxRetries: 0 });
  assert.match(first.text, /Fixture reply to: "My name is Ada\."/);
  const second = await generateText({
    model, maxRetries: 0,
    messages: [{ role: 'user', content: 'My name is Ada.' }, ...first.response.messages, { role: 'user', content: 'What is my name?' }],
  });
  assert.match(second.text, /What is my name\?/);

  // The same, streamed.
  const s1 = streamText({ model, prompt: 'My name is Ada.', maxRetries: 0 });
  let chunks = 0;
  for await (const _ of s1.textStream) chunks++;
  assert.ok(chunks > 1, `${name}: the answer came in ${chunks} chunk(s), not token by token`);
  const r1 = await s1.response;
  const s2 = streamText({
    model, maxRetries: 0,
    messages: [{ role: 'user', content: 'My name is Ada.' }, ...r1.messages, { role: 'user', content: 'What is my name?' }],
  });
  assert.match(await s2.text, /What is my name\?/);

  // A tool turn: the call, its result, the answer.
  const t = await generateText({ model, tools: { weather }, stopWhen: stepCountIs(3), prompt: 'Weather in Paris?', maxRetries: 0 });
  assert.equal(t.steps[0].toolCalls[0].toolName, 'weather');
  assert.match(t.text, /Fixture received the result of weather/);
  const ts = streamText({ model, tools: { weather }, stopWhen: stepCountIs(3), prompt: 'Weather in Paris?', maxRetries: 0 });
  assert.match(await ts.text, /Fixture received the result of weather/);
  const usage = await ts.totalUsage;
  assert.ok(usage.inputTokens > 0);
  console.log(`ai-sdk ${name}: prompt, replayed turn, streamed (${chunks} chunks), tool turn: ok`);
}

// Embeddings (embed, embedMany) are in embeddings.mjs.
