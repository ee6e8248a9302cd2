// LangChain against svcgw: one prompt (invoke and stream) and one tool turn
// per chat model class. Env: SVCGW_URL, SVCGW_API_KEY.
import assert from 'node:assert/strict';
import { ChatOpenAI } from '@langchain/openai';
import { ChatAnthropic } from '@langchain/anthropic';
import { ChatGoogleGenerativeAI } from '@langchain/google-genai';
import { tool } from '@langchain/core/tools';
import { HumanMessage, ToolMessage } from '@langchain/core/messages';
import { z } from 'zod';

const base = process.env.SVCGW_URL, apiKey = process.env.SVCGW_API_KEY;
const models = {
  'openai (chat completions)': new ChatOpenAI({ model: 'gpt-4.1', apiKey, configuration: { baseURL: `${base}/svc/v1` }, maxRetries: 0 }),
  'openai (responses)': new ChatOpenAI({ model: 'gpt-5', apiKey, useResponsesApi: true, configuration: { baseURL: `${base}/svc/v1` }, maxRetries: 0 }),
  anthropic: new ChatAnthropic({ model: 'claude-sonnet-4-5', apiKey, anthropicApiUrl: `${base}/svc`, maxRetries: 0 }),
  google: new ChatGoogleGenerativeAI({ model: 'gemini-2.5-flash', apiKey, baseUrl: `${base}/svc`, maxRetries: 0 }),
};
const weather = tool(async ({ city }) => `${city}: sunny`, {
  name: 'weather', description: 'Current weather of a city', schema: z.object({ city: z.string() }),
});

for (const [name, model] of Object.entries(models)) {
  const reply = await model.invoke('Say hello.');
  assert.match(reply.text, /Fixture reply to: "Say hello\."/);
  // Chunks add up as LangChain adds them (usage included).
  let acc;
  for await (const chunk of await model.stream('Say hello.')) acc = acc ? acc.concat(chunk) : chunk;
  const usage = acc.usage_metadata;
  assert.match(acc.text, /Fixture reply to/);
  assert.ok(usage && usage.input_tokens > 0, `${name}: streamed input_tokens ${usage?.input_tokens}`);

  const withTools = model.bindTools([weather]);
  const ask = new HumanMessage('Weather in Paris?');
  const call = await withTools.invoke([ask]);
  assert.equal(call.tool_calls[0].name, 'weather');
  const result = await weather.invoke(call.tool_calls[0]);
  const answer = await withTools.invoke([ask, call, result instanceof ToolMessage ? result : new ToolMessage({ content: String(result), tool_call_id: call.tool_calls[0].id })]);
  assert.match(answer.text, /Fixture received the result of weather/);
  console.log(`langchain ${name}: prompt, stream (input_tokens ${usage.input_tokens}), tool turn: ok`);
}

// Embeddings (OpenAIEmbeddings, GoogleGenerativeAIEmbeddings) are in
// embeddings.mjs.
