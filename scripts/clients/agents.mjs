// The OpenAI Agents SDK against svcgw: one prompt and one tool turn, run and
// streamed, on its default model (the Responses API). Env: SVCGW_URL,
// SVCGW_API_KEY.
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { Agent, run, tool, setDefaultOpenAIClient, setTracingDisabled } from '@openai/agents';
import { z } from 'zod';

setTracingDisabled(true); // traces go to OpenAI's platform, not to svcgw
setDefaultOpenAIClient(new OpenAI({ baseURL: `${process.env.SVCGW_URL}/svc/v1`, apiKey: process.env.SVCGW_API_KEY, maxRetries: 0 }));

const weather = tool({
  name: 'weather', description: 'Current weather of a city',
  parameters: z.object({ city: z.string() }),
  execute: async ({ city }) => `${city}: sunny`,
});
const agent = new Agent({ name: 'Assistant', instructions: 'Be brief.', model: 'gpt-5' });
const r = await run(agent, 'Say hello.');
assert.match(r.finalOutput, /Fixture reply to: "Say hello\."/);

const withTools = new Agent({ name: 'Forecaster', instructions: 'Use the tool.', model: 'gpt-5', tools: [weather] });
const t = await run(withTools, 'Weather in Paris?');
assert.match(t.finalOutput, /Fixture received the result of weather: "example: sunny"/);

const s = await run(withTools, 'Weather in Paris?', { stream: true });
let deltas = 0;
for await (const ev of s) if (ev.type === 'raw_model_stream_event' && ev.data.type === 'output_text_delta') deltas++;
await s.completed;
assert.match(s.finalOutput, /Fixture received the result of weather/);
// The second turn replays the first run's items (reasoning included).
const again = await run(withTools, [...t.history, { role: 'user', content: 'And in Rome?' }]);
assert.ok(again.finalOutput);
console.log(`openai agents: prompt, tool turn, streamed (${deltas} deltas), follow-up turn: ok`);
