import Anthropic from '@anthropic-ai/sdk';
import { GoogleGenAI } from '@google/genai';
import AnthropicLegacy from 'anthropic-sdk-legacy';
import OpenAI from 'openai';
import {
  chatCompletionsTokens,
  emptyGenerativeSnapshot,
  emptyMessagesSnapshot,
  generativeTokens,
  messagesTokens,
  overlayGenerativeUsage,
  overlayMessagesUsage,
  responsesTokens,
  type ShapeReading,
} from '../../../src/metering/usage-shapes';
import { USAGE_FIXTURE_CASES, readUsage, usageFixture } from '../../support/usage-fixtures';

/**
 * The extractor reads usage from raw bytes with its own JSON and SSE
 * scanning. Here the official SDKs parse the same bytes (each client gets a
 * fetch that answers with the fixture), and the usage and model they end up
 * with must be what the extractor read: the hand-written parsing is held to
 * the real clients.
 */

interface SdkView {
  /** The counts, or the relation they break (never, for these real shapes). */
  tokens: ShapeReading | undefined;
  model: string | undefined;
  text?: string;
}

function fetchAnswering(fixture: string, contentType: string) {
  return async () => new Response(usageFixture(fixture), { status: 200, headers: { 'content-type': contentType } });
}

const CONTENT_TYPES: Record<string, string> = { json: 'application/json', sse: 'text/event-stream' };

function contentTypeOf(fixture: string): string {
  return CONTENT_TYPES[fixture.endsWith('.sse') ? 'sse' : 'json']!;
}

function openai(fixture: string): OpenAI {
  return new OpenAI({
    apiKey: 'sk-test',
    baseURL: 'http://upstream.test/v1',
    maxRetries: 0,
    fetch: fetchAnswering(fixture, contentTypeOf(fixture)),
  });
}

async function viaOpenAiChat(fixture: string): Promise<SdkView> {
  const client = openai(fixture);
  if (!fixture.endsWith('.sse')) {
    const completion = await client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'hi' }] });
    return { tokens: chatCompletionsTokens(completion.usage), model: completion.model };
  }
  const stream = await client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'hi' }], stream: true });
  const view: SdkView = { tokens: undefined, model: undefined, text: '' };
  for await (const chunk of stream) {
    view.model = chunk.model;
    view.text += chunk.choices.map((choice) => choice.delta.content ?? '').join('');
    if (chunk.usage) view.tokens = chatCompletionsTokens(chunk.usage);
  }
  return view;
}

async function viaOpenAiEmbeddings(fixture: string): Promise<SdkView> {
  const result = await openai(fixture).embeddings.create({ model: 'm', input: 'hi', encoding_format: 'float' });
  return { tokens: chatCompletionsTokens(result.usage, true), model: result.model };
}

async function viaOpenAiResponses(fixture: string): Promise<SdkView> {
  const client = openai(fixture);
  if (!fixture.endsWith('.sse')) {
    const result = await client.responses.create({ model: 'm', input: 'hi' });
    return { tokens: responsesTokens(result.usage), model: result.model };
  }
  const stream = await client.responses.create({ model: 'm', input: 'hi', stream: true });
  const view: SdkView = { tokens: undefined, model: undefined, text: '' };
  for await (const event of stream) {
    if (event.type === 'response.output_text.delta') view.text += event.delta;
    if (event.type === 'response.completed') {
      view.tokens = responsesTokens(event.response.usage);
      view.model = event.response.model;
    }
  }
  return view;
}

function messagesView(message: { model: string; usage: unknown }): SdkView {
  const snapshot = emptyMessagesSnapshot();
  overlayMessagesUsage(snapshot, message.usage);
  return { tokens: messagesTokens(snapshot), model: message.model };
}

async function viaAnthropic(fixture: string, legacy: boolean): Promise<SdkView> {
  const options = {
    apiKey: 'sk-ant-test',
    baseURL: 'http://upstream.test',
    maxRetries: 0,
    fetch: fetchAnswering(fixture, contentTypeOf(fixture)),
  };
  const params = { model: 'm', max_tokens: 16, messages: [{ role: 'user' as const, content: 'hi' }] };
  if (legacy) {
    const client = new AnthropicLegacy(options);
    return messagesView(
      fixture.endsWith('.sse') ? await client.messages.stream(params).finalMessage() : await client.messages.create(params),
    );
  }
  const client = new Anthropic(options);
  // MessageStream overlays message_delta's cumulative counts onto message_start's, as the extractor does.
  return messagesView(
    fixture.endsWith('.sse') ? await client.messages.stream(params).finalMessage() : await client.messages.create(params),
  );
}

async function viaGenAi(fixture: string): Promise<SdkView> {
  const ai = new GoogleGenAI({
    apiKey: 'test-key',
    httpOptions: { baseUrl: 'http://upstream.test', fetch: fetchAnswering(fixture, contentTypeOf(fixture)) },
  });
  const params = { model: 'gemini-2.5-flash', contents: 'hi' };
  const snapshot = emptyGenerativeSnapshot();
  let model: string | undefined;
  const chunks = fixture.endsWith('.sse') ? await ai.models.generateContentStream(params) : [await ai.models.generateContent(params)];
  for await (const chunk of chunks) {
    if (chunk.usageMetadata) overlayGenerativeUsage(snapshot, chunk.usageMetadata);
    model = chunk.modelVersion ?? model;
  }
  return { tokens: generativeTokens(snapshot), model };
}

function sdkView(fixture: string, family: string, path: string): Promise<SdkView> {
  if (family === 'messages') return viaAnthropic(fixture, false);
  if (family === 'generative-content') return viaGenAi(fixture);
  if (path.endsWith('/embeddings')) return viaOpenAiEmbeddings(fixture);
  if (path.endsWith('/responses')) return viaOpenAiResponses(fixture);
  return viaOpenAiChat(fixture);
}

// @google/genai always streams with alt=sse, so no SDK reads the JSON-array stream; the chunking property ties it to the SSE one.
const SDK_READABLE = USAGE_FIXTURE_CASES.filter((c) => c.fixture !== 'gemini-stream-array.json');

describe('the extractor reads what the official SDK reads from the same bytes', () => {
  it.each(SDK_READABLE.map((c) => [c.fixture, c] as const))('%s', async (_name, c) => {
    const sdk = await sdkView(c.fixture, c.response.family, c.response.path);
    const reading = readUsage(c.response, usageFixture(c.fixture));
    expect(reading.kind === 'reported' ? reading.tokens : undefined).toEqual(sdk.tokens);
    expect(reading.model).toBe(sdk.model);
    if (reading.kind === 'none') expect(reading.deliveredTextBytes).toBe(Buffer.byteLength(sdk.text ?? '', 'utf8'));
  });

  it.each(['messages.json', 'messages-stream.sse', 'messages-stream-cumulative.sse'])('%s, with the 0.x Anthropic SDK', async (fixture) => {
    const c = USAGE_FIXTURE_CASES.find((candidate) => candidate.fixture === fixture)!;
    const reading = readUsage(c.response, usageFixture(fixture));
    expect(reading.kind === 'reported' && reading.tokens).toEqual((await viaAnthropic(fixture, true)).tokens);
  });

  it('the delivered text of a Responses API stream is what the SDK shows as output text', async () => {
    const sdk = await viaOpenAiResponses('responses-stream.sse');
    const c = USAGE_FIXTURE_CASES.find((candidate) => candidate.fixture === 'responses-stream.sse')!;
    // Cut before response.completed: nothing reported, the text deltas measured.
    const bytes = usageFixture('responses-stream.sse');
    const text = new TextDecoder().decode(bytes);
    const cut = Buffer.byteLength(text.slice(0, text.indexOf('event: response.completed')), 'utf8');
    const reading = readUsage(c.response, bytes.slice(0, cut));
    expect(reading).toMatchObject({ kind: 'none', reason: 'no-usage-reported', deliveredTextBytes: Buffer.byteLength(sdk.text!, 'utf8') });
  });
});
