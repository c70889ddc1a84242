import fc from 'fast-check';
import type { RouteFamily } from '../../src/check/routes/route';
import type { TokenCounts, UsageReading } from '../../src/metering/usage';
import { USAGE_FIXTURE_CASES, readUsage, response, usageFixture } from '../support/usage-fixtures';

/**
 * Envoy hands the processor the body in the chunks the upstream connection
 * delivered: an SSE event, a JSON token or a UTF-8 character can be split
 * anywhere. Whatever the split, the usage read must be the one of the whole
 * body; a body cut short (a client that went away) reads as its delivered
 * part; and no input makes the extractor throw.
 */

const cases = USAGE_FIXTURE_CASES.map((c) => ({ ...c, bytes: usageFixture(c.fixture) }));

/** Positions that fall inside a multi-byte UTF-8 character (before a continuation byte). */
function insideCharacters(bytes: Uint8Array): number[] {
  const positions: number[] = [];
  bytes.forEach((byte, index) => {
    if ((byte & 0xc0) === 0x80) positions.push(index);
  });
  return positions;
}

describe('usage is the same however the body is chunked', () => {
  it.each(cases.map((c) => [c.fixture, c] as const))('%s: random split points', (_name, c) => {
    fc.assert(
      fc.property(fc.uniqueArray(fc.integer({ min: 0, max: c.bytes.length }), { maxLength: 40 }), (cuts) => {
        expect(readUsage(c.response, c.bytes, cuts)).toEqual(c.expected);
      }),
      { numRuns: 150 },
    );
  });

  it.each(cases.map((c) => [c.fixture, c] as const))('%s: one byte at a time, and cut inside every multi-byte character', (_name, c) => {
    const everyByte = Array.from({ length: c.bytes.length }, (_, index) => index);
    expect(readUsage(c.response, c.bytes, everyByte)).toEqual(c.expected);
    const inside = insideCharacters(c.bytes);
    // Every stream holds multi-byte text (the JSON bodies mostly \u-escape theirs, which tests the escapes instead).
    if (c.fixture.endsWith('.sse') || c.fixture === 'gemini-stream-array.json') expect(inside.length).toBeGreaterThan(0);
    expect(readUsage(c.response, c.bytes, inside)).toEqual(c.expected);
  });
});

function countsOf(reading: UsageReading): TokenCounts | undefined {
  return reading.kind === 'reported' ? reading.tokens : undefined;
}

describe('a body cut short reads as what it delivered', () => {
  it.each(cases.map((c) => [c.fixture, c] as const))('%s: any prefix, in any chunks', (_name, c) => {
    const whole = c.expected;
    fc.assert(
      fc.property(fc.integer({ min: 0, max: c.bytes.length }), fc.uniqueArray(fc.nat(), { maxLength: 10 }), (length, seeds) => {
        const prefix = c.bytes.slice(0, length);
        const cuts = seeds.map((seed) => seed % (length + 1));
        const reading = readUsage(c.response, prefix, cuts);
        // The same prefix in one piece reads the same: a cut-off read does not depend on chunking either.
        expect(reading).toEqual(readUsage(c.response, prefix));
        // Running counts only grow towards the final ones; nothing is ever summed past them.
        const counts = countsOf(reading);
        const wholeCounts = countsOf(whole);
        if (counts && wholeCounts) {
          for (const key of Object.keys(counts) as (keyof TokenCounts)[])
            expect(counts[key] ?? 0).toBeLessThanOrEqual(wholeCounts[key] ?? 0);
        }
        if (reading.kind === 'none' && whole.kind === 'none')
          expect(reading.deliveredTextBytes).toBeLessThanOrEqual(whole.deliveredTextBytes);
        if (reading.streamComplete) expect(whole.streamComplete).toBe(true);
      }),
      { numRuns: 200 },
    );
  });
});

describe('no input makes the extractor throw', () => {
  const families: RouteFamily[] = ['chat-completions', 'messages', 'generative-content'];
  const paths: Record<string, string> = {
    'chat-completions': '/v1/chat/completions',
    messages: '/v1/messages',
    'generative-content': '/v1beta/models/g:streamGenerateContent',
  };
  const contentType = fc.constantFrom(
    undefined,
    'application/json',
    'text/event-stream',
    'text/plain',
    '',
    'application/json; charset=utf-8',
  );

  it('arbitrary bytes, any family and content type, any chunks', () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...families),
        contentType,
        fc.uint8Array({ maxLength: 300 }),
        fc.array(fc.nat(), { maxLength: 10 }),
        (family, type, bytes, seeds) => {
          const reading = readUsage(
            response(family, paths[family]!, type),
            bytes,
            seeds.map((seed) => seed % (bytes.length + 1)),
          );
          expect(['none', 'reported']).toContain(reading.kind);
        },
      ),
      { numRuns: 1000 },
    );
  });

  it('real bodies with bytes changed, inserted or removed', () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...cases),
        fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 }), fc.constantFrom('set', 'insert', 'remove')), {
          minLength: 1,
          maxLength: 5,
        }),
        fc.array(fc.nat(), { maxLength: 10 }),
        (c, edits, seeds) => {
          let bytes = Array.from(c.bytes);
          for (const [at, value, edit] of edits) {
            const position = at % (bytes.length + 1);
            if (edit === 'set' && position < bytes.length) bytes[position] = value;
            else if (edit === 'insert') bytes = [...bytes.slice(0, position), value, ...bytes.slice(position)];
            else bytes = [...bytes.slice(0, position), ...bytes.slice(position + 1)];
          }
          const body = Uint8Array.from(bytes);
          const reading = readUsage(
            c.response,
            body,
            seeds.map((seed) => seed % (body.length + 1)),
          );
          expect(reading).toEqual(readUsage(c.response, body));
        },
      ),
      { numRuns: 500 },
    );
  });
});
