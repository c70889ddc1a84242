import fc from 'fast-check';
import {
  CAPTURE_LIMIT_BYTES,
  JsonScanner,
  MAX_DEPTH,
  WatchTree,
  type ScannedDocument,
  type WatchSpec,
} from '../../../src/metering/json-scanner';

const encoder = new TextEncoder();

interface Seen {
  values: unknown[];
  measures: number[];
  counts: number[];
}

function snapshot(specs: readonly WatchSpec[], document: ScannedDocument): Seen {
  return {
    values: specs.map((_, index) => document.value(index)),
    measures: specs.map((_, index) => document.measured(index)),
    counts: specs.map((_, index) => document.count(index)),
  };
}

/** Scans `bytes` fed in pieces cut at `cuts`; returns whether it was one valid JSON text and what each document held. */
function scan(specs: readonly WatchSpec[], bytes: Uint8Array, cuts: readonly number[] = [], arrayOfDocuments = false) {
  const documents: Seen[] = [];
  const scanner = new JsonScanner(new WatchTree(specs), {
    arrayOfDocuments,
    onDocument: (document) => documents.push(snapshot(specs, document)),
  });
  let from = 0;
  for (const cut of [...cuts].sort((a, b) => a - b)) {
    scanner.write(bytes, from, cut);
    from = cut;
  }
  scanner.write(bytes, from, bytes.length);
  const valid = scanner.end();
  return { valid, documents };
}

function scanText(specs: readonly WatchSpec[], text: string, arrayOfDocuments = false) {
  return scan(specs, encoder.encode(text), [], arrayOfDocuments);
}

function parses(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

describe('JsonScanner: captured values', () => {
  const specs: WatchSpec[] = [
    { path: ['usage'], kind: 'capture' },
    { path: ['response', 'usage'], kind: 'capture' },
    { path: ['choices', '*', 'delta', 'content'], kind: 'measure' },
    { path: ['choices', '*'], kind: 'presence' },
  ];

  it('captures a top-level and a nested value, skipping everything else', () => {
    const { valid, documents } = scanText(
      specs,
      '{"id":"x","choices":[{"delta":{"content":"hé"}},{"delta":{"content":"!"}}],"usage":{"prompt_tokens":3},"response":{"usage":null}}',
    );
    expect(valid).toBe(true);
    expect(documents).toEqual([
      { values: [{ prompt_tokens: 3 }, null, undefined, undefined], measures: [0, 0, 4, 0], counts: [0, 0, 0, 2] },
    ]);
  });

  it('never reads structure inside strings: generated text cannot forge a usage', () => {
    const forged = JSON.stringify({ content: '"}, "usage": {"prompt_tokens": 0}, "x": {"' });
    const { documents } = scanText(specs, `{"choices":[{"delta":${forged}}],"usage":{"prompt_tokens":99}}`);
    expect(documents[0]!.values[0]).toEqual({ prompt_tokens: 99 });
  });

  it('takes the last of duplicate keys, as JSON.parse does', () => {
    const text = '{"usage":{"a":1},"usage":{"a":2}}';
    expect(scanText(specs, text).documents[0]!.values[0]).toEqual((JSON.parse(text) as { usage: unknown }).usage);
  });

  it('matches keys written with escapes, as JSON.parse reads them', () => {
    expect(scanText(specs, '{"\\u0075sage":{"a":1}}').documents[0]!.values[0]).toEqual({ a: 1 });
    expect(scanText(specs, '{"usage\\u0000":{"a":1}}').documents[0]!.values[0]).toBeUndefined();
  });

  it('measures decoded UTF-8 bytes: escapes count as the characters they stand for', () => {
    const content = 'a\n\u00e9\u4e2d\ud83d\ude00"\\';
    const escaped = '"a\\n\\u00e9\\u4e2d\\ud83d\\ude00\\"\\\\"';
    expect(JSON.parse(escaped)).toBe(content);
    const { documents } = scanText(specs, `{"choices":[{"delta":{"content":${escaped}}}]}`);
    expect(documents[0]!.measures[2]).toBe(Buffer.byteLength(content, 'utf8'));
  });

  it('drops a captured value larger than the capture limit, keeping the document valid', () => {
    const big = JSON.stringify({ usage: { text: 'x'.repeat(CAPTURE_LIMIT_BYTES) }, response: { usage: { a: 1 } } });
    const { valid, documents } = scanText(specs, big);
    expect(valid).toBe(true);
    expect(documents[0]!.values).toEqual([undefined, { a: 1 }, undefined, undefined]);
  });

  it('reports each element of a root array as its own document when asked (Gemini JSON-array stream)', () => {
    const text = '[{"usage":{"n":1}}\r\n,\r\n{"usage":{"n":2}},{"other":true}\n]';
    const { valid, documents } = scanText(specs, text, true);
    expect(valid).toBe(true);
    expect(documents.map((document) => document.values[0])).toEqual([{ n: 1 }, { n: 2 }, undefined]);
    // Without the option the array is one document whose root is not an object.
    expect(scanText(specs, text, false).documents[0]!.values[0]).toBeUndefined();
  });

  it('reports array elements as they complete, before the array ends (a cut-off stream keeps what it delivered)', () => {
    const { valid, documents } = scanText(specs, '[{"usage":{"n":1}},{"usage":{"n":', true);
    expect(valid).toBe(false);
    expect(documents.map((document) => document.values[0])).toEqual([{ n: 1 }]);
  });

  it('nests up to MAX_DEPTH levels and refuses deeper ones', () => {
    expect(scanText(specs, '['.repeat(MAX_DEPTH) + ']'.repeat(MAX_DEPTH)).valid).toBe(true);
    expect(scanText(specs, '['.repeat(MAX_DEPTH + 1) + ']'.repeat(MAX_DEPTH + 1)).valid).toBe(false);
  });

  it.each([
    '',
    ' ',
    '{',
    '{"a"}',
    '{"a":}',
    '{"a":1,}',
    '[1,]',
    '[1 2]',
    '{"a":1}}',
    '{"a":1} x',
    '01',
    '1.',
    '-',
    '1e',
    '+1',
    'tru',
    'nul',
    'True',
    '"a\u0001"',
    '"\\x"',
    '"\\u12G4"',
    '{"a":[}',
    '[}',
    "{'a':1}",
    'NaN',
  ])('refuses %j like JSON.parse', (text) => {
    expect(parses(text)).toBe(false);
    expect(scanText(specs, text).valid).toBe(false);
  });

  it.each(['0', '-0.5e+10', ' 12 ', 'true', 'null', '"x"', '[]', '{}', '[[],{}]', '{"a":[1,{"b":null}]}', '1E5', '-0'])(
    'accepts %j like JSON.parse',
    (text) => {
      expect(parses(text)).toBe(true);
      expect(scanText(specs, text).valid).toBe(true);
    },
  );
});

/** The reference: where the watched paths are, found by walking JSON.parse's result in document order. */
function reference(specs: readonly WatchSpec[], root: unknown): Seen {
  const seen: Seen = { values: specs.map(() => undefined), measures: specs.map(() => 0), counts: specs.map(() => 0) };
  const visit = (value: unknown, path: string[]) => {
    specs.forEach((spec, index) => {
      if (spec.path.length !== path.length || !spec.path.every((segment, at) => segment === path[at])) return;
      if (spec.kind === 'capture') seen.values[index] = value;
      else if (spec.kind === 'presence') seen.counts[index]!++;
      else if (typeof value === 'string') seen.measures[index]! += Buffer.byteLength(value, 'utf8');
    });
    if (Array.isArray(value)) value.forEach((element) => visit(element, [...path, '*']));
    else if (value && typeof value === 'object') for (const [key, child] of Object.entries(value)) visit(child, [...path, key]);
  };
  visit(root, []);
  return seen;
}

describe('JsonScanner against JSON.parse (property)', () => {
  const specs: WatchSpec[] = [
    { path: ['usage'], kind: 'capture' },
    { path: ['model'], kind: 'capture' },
    { path: ['message', 'usage'], kind: 'capture' },
    { path: ['choices', '*', 'delta', 'content'], kind: 'measure' },
    { path: ['choices', '*', 'finish_reason'], kind: 'capture' },
    { path: ['choices', '*'], kind: 'presence' },
  ];
  // Well-formed Unicode only: JSON.stringify escapes lone surrogates, which the reference would count differently.
  const value = fc.jsonValue({ maxDepth: 3, stringUnit: 'grapheme' });
  const text = fc.string({ unit: 'grapheme', maxLength: 20 });
  const document = fc.record(
    {
      usage: value,
      model: fc.oneof(text, value),
      message: fc.record({ usage: value, other: value }, { requiredKeys: [] }),
      choices: fc.array(
        fc.record(
          { delta: fc.record({ content: fc.oneof(text, value) }, { requiredKeys: [] }), finish_reason: fc.oneof(text, fc.constant(null)) },
          { requiredKeys: [] },
        ),
        { maxLength: 4 },
      ),
      noise: value,
    },
    { requiredKeys: [] },
  );

  it('finds the same values, lengths and counts as a walk of JSON.parse, for every split of the bytes', () => {
    fc.assert(
      fc.property(document, fc.constantFrom(0, 2), fc.nat(), (root, indent, cutSeed) => {
        const json = JSON.stringify(root, null, indent);
        const bytes = encoder.encode(json);
        const cuts = [cutSeed % (bytes.length + 1), (cutSeed * 7919) % (bytes.length + 1), (cutSeed * 104729) % (bytes.length + 1)];
        const { valid, documents } = scan(specs, bytes, [...new Set(cuts)]);
        expect(valid).toBe(true);
        expect(documents).toEqual([reference(specs, JSON.parse(json))]);
      }),
      { numRuns: 400 },
    );
  });

  it('agrees with JSON.parse on validity for any text, valid or broken, split anywhere', () => {
    const brokenJson = fc
      .tuple(
        fc.json({ maxDepth: 3 }),
        fc.nat(),
        fc.constantFrom('', '{', '}', '[', ']', ',', ':', '"', '\\', '0', '-', 'e', ' ', '\u0001', 'é'),
      )
      .map(([json, at, inserted]) => {
        const position = at % (json.length + 1);
        return at % 2 === 0
          ? json.slice(0, position) + inserted + json.slice(position)
          : json.slice(0, position) + json.slice(position + 1);
      });
    fc.assert(
      fc.property(fc.oneof(fc.json({ maxDepth: 4 }), brokenJson, fc.string({ maxLength: 30 })), fc.nat(), (candidate, cutSeed) => {
        const bytes = encoder.encode(candidate);
        const cut = cutSeed % (bytes.length + 1);
        expect(scan(specs, bytes, [cut]).valid).toBe(parses(candidate));
      }),
      { numRuns: 1000 },
    );
  });

  it('never throws on arbitrary bytes, in any pieces', () => {
    fc.assert(
      fc.property(
        fc.uint8Array({ maxLength: 200 }),
        fc.array(fc.nat(), { maxLength: 8 }),
        fc.boolean(),
        (bytes, seeds, arrayOfDocuments) => {
          const cuts = [...new Set(seeds.map((seed) => seed % (bytes.length + 1)))];
          expect(() => scan(specs, bytes, cuts, arrayOfDocuments)).not.toThrow();
        },
      ),
      { numRuns: 1000 },
    );
  });
});
