import fc from 'fast-check';
import { prng } from '../../bench/traffic';
import { rawFrame } from '../../support/raw-h2-frames';
import { once } from 'node:events';
import * as http2 from 'node:http2';
import * as net from 'node:net';
import { HpackDecoder, HpackError } from '../../../src/transport/http2/hpack-decoder';
import { HPACK_STATIC_TABLE } from '../../../src/transport/http2/hpack-static-table';
import { hex, hpackInteger, hpackString, huffmanBits, packBits } from '../../support/hpack-encoding';

/**
 * The HPACK decoder (src/transport/http2/hpack-decoder.ts) against
 * RFC 7541's own examples, a reference model of the dynamic table, node:http2's
 * client (nghttp2's encoder) over a socket, and malformed input.
 */
type Field = [name: string, value: string];

function decodeBlock(decoder: HpackDecoder, block: Buffer): { fields: Field[]; listSize: number } {
  const out: string[] = [];
  const listSize = decoder.decode(block, 0, block.length, out);
  return { fields: pairs(out), listSize };
}

function pairs(flat: readonly string[]): Field[] {
  const fields: Field[] = [];
  for (let i = 0; i < flat.length; i += 2) fields.push([flat[i]!, flat[i + 1]!]);
  return fields;
}

function blockOf(...octets: (number | number[])[]): Buffer {
  return Buffer.from(octets.flat());
}

/** An entry's or a field's size as §4.1 counts it. */
function sizeOf(fields: readonly Field[]): number {
  return fields.reduce((sum, [name, value]) => sum + name.length + value.length + 32, 0);
}

describe('RFC 7541 Appendix C', () => {
  // Each example: the block, the header list it decodes to, the dynamic table after it (newest first) and its size.
  it.each([
    [
      'C.2.1 literal with indexing',
      '400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572',
      [['custom-key', 'custom-header']],
      [['custom-key', 'custom-header']],
      55,
    ],
    ['C.2.2 literal without indexing', '040c 2f73 616d 706c 652f 7061 7468', [[':path', '/sample/path']], [], 0],
    ['C.2.3 literal never indexed', '1008 7061 7373 776f 7264 0673 6563 7265 74', [['password', 'secret']], [], 0],
    ['C.2.4 indexed', '82', [[':method', 'GET']], [], 0],
  ] as [string, string, Field[], Field[], number][])('%s', (_section, block, fields, table, tableSize) => {
    const decoder = new HpackDecoder();
    expect(decodeBlock(decoder, hex(block)).fields).toEqual(fields);
    expect(decoder.dynamicEntries()).toEqual(table);
    expect(decoder.dynamicTableSize).toBe(tableSize);
  });

  const REQUESTS: { fields: Field[]; table: Field[]; tableSize: number; listSize: number }[] = [
    {
      fields: [
        [':method', 'GET'],
        [':scheme', 'http'],
        [':path', '/'],
        [':authority', 'www.example.com'],
      ],
      table: [[':authority', 'www.example.com']],
      tableSize: 57,
      // 42 (:method GET) + 43 (:scheme http) + 38 (:path /) + 57 (:authority www.example.com)
      listSize: 180,
    },
    {
      fields: [
        [':method', 'GET'],
        [':scheme', 'http'],
        [':path', '/'],
        [':authority', 'www.example.com'],
        ['cache-control', 'no-cache'],
      ],
      table: [
        ['cache-control', 'no-cache'],
        [':authority', 'www.example.com'],
      ],
      tableSize: 110,
      // 180 + 53 (cache-control no-cache)
      listSize: 233,
    },
    {
      fields: [
        [':method', 'GET'],
        [':scheme', 'https'],
        [':path', '/index.html'],
        [':authority', 'www.example.com'],
        ['custom-key', 'custom-value'],
      ],
      table: [
        ['custom-key', 'custom-value'],
        ['cache-control', 'no-cache'],
        [':authority', 'www.example.com'],
      ],
      tableSize: 164,
      // 42 + 44 (:scheme https) + 48 (:path /index.html) + 57 + 54 (custom-key custom-value)
      listSize: 245,
    },
  ];

  it.each([
    [
      'C.3 requests without Huffman coding',
      [
        '8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d',
        '8286 84be 5808 6e6f 2d63 6163 6865',
        '8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65',
      ],
    ],
    [
      'C.4 requests with Huffman coding',
      [
        '8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff',
        '8286 84be 5886 a8eb 1064 9cbf',
        '8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf',
      ],
    ],
  ])('%s, one connection', (_section, blocks) => {
    const decoder = new HpackDecoder();
    blocks.forEach((block, i) => {
      const expected = REQUESTS[i]!;
      expect(decodeBlock(decoder, hex(block))).toEqual({ fields: expected.fields, listSize: expected.listSize });
      expect(decoder.dynamicEntries()).toEqual(expected.table);
      expect(decoder.dynamicTableSize).toBe(expected.tableSize);
    });
  });

  const date21 = 'Mon, 21 Oct 2013 20:13:21 GMT';
  const date22 = 'Mon, 21 Oct 2013 20:13:22 GMT';
  const cookie = 'foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1';
  const RESPONSES: { fields: Field[]; table: Field[]; tableSize: number; listSize: number }[] = [
    {
      fields: [
        [':status', '302'],
        ['cache-control', 'private'],
        ['date', date21],
        ['location', 'https://www.example.com'],
      ],
      table: [
        ['location', 'https://www.example.com'],
        ['date', date21],
        ['cache-control', 'private'],
        [':status', '302'],
      ],
      tableSize: 222,
      // 42 (:status 302) + 52 (cache-control private) + 65 (date) + 63 (location)
      listSize: 222,
    },
    {
      fields: [
        [':status', '307'],
        ['cache-control', 'private'],
        ['date', date21],
        ['location', 'https://www.example.com'],
      ],
      table: [
        [':status', '307'],
        ['location', 'https://www.example.com'],
        ['date', date21],
        ['cache-control', 'private'],
      ],
      tableSize: 222,
      listSize: 222,
    },
    {
      fields: [
        [':status', '200'],
        ['cache-control', 'private'],
        ['date', date22],
        ['location', 'https://www.example.com'],
        ['content-encoding', 'gzip'],
        ['set-cookie', cookie],
      ],
      table: [
        ['set-cookie', cookie],
        ['content-encoding', 'gzip'],
        ['date', date22],
      ],
      tableSize: 215,
      // 42 + 52 + 65 + 63 + 52 (content-encoding gzip) + 98 (set-cookie, 56 octets)
      listSize: 372,
    },
  ];

  it.each([
    [
      'C.5 responses without Huffman coding',
      [
        '4803 3330 3258 0770 7269 7661 7465 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3120 474d 546e 1768 ' +
          '7474 7073 3a2f 2f77 7777 2e65 7861 6d70 6c65 2e63 6f6d',
        '4803 3330 37c1 c0bf',
        '88c1 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3220 474d 54c0 5a04 677a 6970 7738 666f 6f3d 4153 ' +
          '444a 4b48 514b 425a 584f 5157 454f 5049 5541 5851 5745 4f49 553b 206d 6178 2d61 6765 3d33 3630 303b 2076 6572 7369 6f6e ' +
          '3d31',
      ],
    ],
    [
      'C.6 responses with Huffman coding',
      [
        '4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6 2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 ' +
          'e9ae 82ae 43d3',
        '4883 640e ffc1 c0bf',
        '88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab 77ad 94e7 821d d7f2 e6c7 b335 dfdf cd5b ' +
          '3960 d5af 2708 7f36 72c1 ab27 0fb5 291f 9587 3160 65c0 03ed 4ee5 b106 3d50 07',
      ],
    ],
  ])('%s, a 256-octet table, one connection', (_section, blocks) => {
    const decoder = new HpackDecoder(256);
    blocks.forEach((block, i) => {
      const expected = RESPONSES[i]!;
      expect(decodeBlock(decoder, hex(block))).toEqual({ fields: expected.fields, listSize: expected.listSize });
      expect(decoder.dynamicEntries()).toEqual(expected.table);
      expect(decoder.dynamicTableSize).toBe(expected.tableSize);
      expect(decoder.dynamicTableSize).toBe(sizeOf(expected.table));
    });
  });
});

describe('HpackDecoder', () => {
  it('decodes block[start, end) of a larger buffer, nothing outside it', () => {
    const block = hex('8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d');
    const buffer = Buffer.concat([Buffer.from([0x80, 0xff]), block, Buffer.from([0x80])]);
    const out: string[] = [];
    expect(new HpackDecoder().decode(buffer, 2, 2 + block.length, out)).toBe(180);
    expect(pairs(out)).toEqual(REQUEST_1);
  });

  it('appends to out as given', () => {
    const out = ['kept', 'as is'];
    new HpackDecoder().decode(Buffer.from([0x82]), 0, 1, out);
    expect(out).toEqual(['kept', 'as is', ':method', 'GET']);
  });

  it('decodes an empty block to no fields, header list size 0', () => {
    expect(decodeBlock(new HpackDecoder(), Buffer.alloc(0))).toEqual({ fields: [], listSize: 0 });
  });

  it('knows all 61 static entries', () => {
    expect(HPACK_STATIC_TABLE).toHaveLength(61);
    const block = Buffer.from(HPACK_STATIC_TABLE.map((_entry, i) => 0x80 | (i + 1)));
    const { fields, listSize } = decodeBlock(new HpackDecoder(), block);
    expect(fields).toEqual(HPACK_STATIC_TABLE.map(({ name, value }) => [name, value]));
    expect(fields[0]).toEqual([':authority', '']);
    expect(fields[15]).toEqual(['accept-encoding', 'gzip, deflate']);
    expect(fields[60]).toEqual(['www-authenticate', '']);
    expect(listSize).toBe(sizeOf(fields));
  });

  it('reads every octet of a literal as one latin1 char, and counts it as one octet', () => {
    const value = Buffer.from([0x00, 0x7f, 0x80, 0xe9, 0xff]).toString('latin1');
    const block = blockOf(0x00, hpackString('x-bin'), hpackString(value), 0x00, hpackString('x-huff', true), hpackString(value, true));
    expect(decodeBlock(new HpackDecoder(), block)).toEqual({
      fields: [
        ['x-bin', '\u0000\u007f\u0080\u00e9\u00ff'],
        ['x-huff', '\u0000\u007f\u0080\u00e9\u00ff'],
      ],
      // (5 + 5 + 32) + (6 + 5 + 32)
      listSize: 85,
    });
  });

  it('counts the header list size over every field, indexed or literal, empty or not', () => {
    const decoder = new HpackDecoder();
    decodeBlock(decoder, blockOf(0x40, hpackString('x-a'), hpackString('12345')));
    const block = Buffer.concat([
      blockOf(0xbe), // x-a: 12345 from the dynamic table: 3 + 5 + 32 = 40
      blockOf(0x83), // :method POST: 7 + 4 + 32 = 43
      blockOf(0x00, hpackString(''), hpackString('')), // empty name and value: 32
      blockOf(0x10, hpackString('authorization', true), hpackString('Bearer x', true)), // 13 + 8 + 32 = 53
      blockOf(hpackInteger(31, 4), hpackString('application/grpc')), // content-type (index 31): 12 + 16 + 32 = 60
    ]);
    expect(decodeBlock(decoder, block).listSize).toBe(40 + 43 + 32 + 53 + 60);
  });

  it('indexes a literal whose name comes from the dynamic table, before evicting that entry', () => {
    // A 70-octet table holds one x-long entry; indexing a new one under its name evicts it (§4.4: the name is read first).
    const decoder = new HpackDecoder(70);
    decodeBlock(decoder, blockOf(0x40, hpackString('x-long'), hpackString('aaaaaaaaaa')));
    expect(decodeBlock(decoder, blockOf(0x7e, hpackString('bbbbbbbbbbbb'))).fields).toEqual([['x-long', 'bbbbbbbbbbbb']]);
    expect(decoder.dynamicEntries()).toEqual([['x-long', 'bbbbbbbbbbbb']]);
  });

  it('empties the table for an entry larger than it, and still emits the field (§4.4)', () => {
    const decoder = new HpackDecoder(100);
    decodeBlock(decoder, blockOf(0x40, hpackString('x-a'), hpackString('1')));
    expect(decoder.dynamicTableSize).toBe(36);
    const big = 'v'.repeat(70); // 3 + 70 + 32 = 105 > 100
    expect(decodeBlock(decoder, blockOf(0x40, hpackString('x-b'), hpackString(big))).fields).toEqual([['x-b', big]]);
    expect(decoder.dynamicEntries()).toEqual([]);
    expect(decoder.dynamicTableSize).toBe(0);
    // An entry of exactly the table's size fits.
    const exact = 'v'.repeat(65);
    decodeBlock(decoder, blockOf(0x40, hpackString('x-c'), hpackString(exact)));
    expect(decoder.dynamicEntries()).toEqual([['x-c', exact]]);
    expect(decoder.dynamicTableSize).toBe(100);
  });

  it('applies table size updates at the start of a block, evicting down to the new size (§4.3, §6.3)', () => {
    const decoder = new HpackDecoder();
    decodeBlock(decoder, hex('8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d'));
    decodeBlock(decoder, hex('8286 84be 5808 6e6f 2d63 6163 6865'));
    expect(decoder.dynamicTableSize).toBe(110);
    // To 60: the older :authority entry (57) goes, cache-control (53) stays.
    expect(decodeBlock(decoder, blockOf(hpackInteger(60, 5, 0x20), 0xbe)).fields).toEqual([['cache-control', 'no-cache']]);
    expect(decoder.dynamicEntries()).toEqual([['cache-control', 'no-cache']]);
    expect(decoder.dynamicTableMaxSize).toBe(60);
    // To 0 and back to 4096 in one block (§4.2: the smallest, then the final size): the table is empty after.
    expect(decodeBlock(decoder, blockOf(0x20, hpackInteger(4096, 5, 0x20), 0x82)).fields).toEqual([[':method', 'GET']]);
    expect(decoder.dynamicEntries()).toEqual([]);
    expect(decoder.dynamicTableMaxSize).toBe(4096);
    // A block of size updates only.
    expect(decodeBlock(decoder, blockOf(hpackInteger(100, 5, 0x20)))).toEqual({ fields: [], listSize: 0 });
    expect(decoder.dynamicTableMaxSize).toBe(100);
  });

  it('flags a block with a field name HTTP/2 forbids (RFC 9113 §8.2), also one taken from the table, until it is evicted', () => {
    const decoder = new HpackDecoder();
    const flagged = (block: Buffer) => (decodeBlock(decoder, block), decoder.hasInvalidField);
    expect(flagged(blockOf(0x82, 0x00, hpackString('x-fine'), hpackString('1')))).toBe(false);
    expect(flagged(blockOf(0x00, hpackString('X-Up'), hpackString('1')))).toBe(true);
    expect(flagged(blockOf(0x00, hpackString('x:colon'), hpackString('1')))).toBe(true);
    expect(flagged(blockOf(0x00, hpackString('keep-alive'), hpackString('1')))).toBe(true);
    // transfer-encoding, static index 57: as a whole field, as a literal's name.
    expect(flagged(blockOf(0x80 | 57))).toBe(true);
    expect(flagged(blockOf(0x0f, 57 - 15, hpackString('chunked')))).toBe(true);
    // Indexed: flagged when added, and on each reference (name or whole field) while it is in the table.
    expect(flagged(blockOf(0x40, hpackString('X-Up'), hpackString('1')))).toBe(true);
    expect(flagged(blockOf(0x40, hpackString('x-ok'), hpackString('2')))).toBe(false);
    expect(flagged(blockOf(0xbf))).toBe(true);
    expect(flagged(blockOf(0x0f, 63 - 15, hpackString('3')))).toBe(true);
    expect(flagged(blockOf(0xbe))).toBe(false);
    // Evicted by a size update: the valid entries left are read as before.
    expect(flagged(blockOf(hpackInteger(40, 5, 0x20), 0xbe))).toBe(false);
    expect(decoder.dynamicEntries()).toEqual([['x-ok', '2']]);
    expect(flagged(blockOf(hpackInteger(4096, 5, 0x20), 0x40, hpackString('x-new'), hpackString('4'), 0xbf))).toBe(false);
  });

  it('flags a block with a field value HTTP/2 forbids (RFC 9113 §8.2.1), also one taken from the table, until it is evicted', () => {
    const decoder = new HpackDecoder();
    const flagged = (block: Buffer) => (decodeBlock(decoder, block), decoder.hasInvalidField);
    for (const value of ['a\u0000b', 'a\rb', 'a\nb', ' a', 'a ', '\ta', 'a\t']) {
      expect(flagged(blockOf(0x82, 0x00, hpackString('x-v'), hpackString(value)))).toBe(true);
    }
    for (const value of ['', 'a b', 'a\tb', '✓ ok']) expect(flagged(blockOf(0x00, hpackString('x-v'), hpackString(value)))).toBe(false);
    // A bad value with a static name, and a good value with a dynamic name.
    expect(flagged(blockOf(0x0f, 31 - 15, hpackString('application/grpc\r')))).toBe(true);
    // Indexed: flagged when added, and when the whole field is referenced while it is in the table; its name alone is fine.
    expect(flagged(blockOf(0x40, hpackString('x-v'), hpackString('a\nb')))).toBe(true);
    expect(flagged(blockOf(0x40, hpackString('x-ok'), hpackString('2')))).toBe(false);
    expect(flagged(blockOf(0xbf))).toBe(true);
    expect(flagged(blockOf(0x0f, 63 - 15, hpackString('fine')))).toBe(false);
    expect(flagged(blockOf(0xbe))).toBe(false);
    // Evicted by a size update: the valid entry left is read as before.
    expect(flagged(blockOf(hpackInteger(40, 5, 0x20), 0xbe))).toBe(false);
    expect(decoder.dynamicEntries()).toEqual([['x-ok', '2']]);
  });

  it('keeps entries with a 0-octet table out, emitting the fields', () => {
    const decoder = new HpackDecoder(0);
    expect(decodeBlock(decoder, blockOf(0x40, hpackString('x-a'), hpackString('1'), 0x82)).fields).toEqual([
      ['x-a', '1'],
      [':method', 'GET'],
    ]);
    expect(decoder.dynamicTableSize).toBe(0);
    expect(() => decodeBlock(decoder, Buffer.from([0xbe]))).toThrow(HpackError);
  });

  it('accepts integers up to 2^31 - 1', () => {
    const decoder = new HpackDecoder(0x7fffffff);
    decodeBlock(decoder, blockOf(hpackInteger(0x7fffffff, 5, 0x20)));
    expect(decoder.dynamicTableMaxSize).toBe(0x7fffffff);
    // The longest form: 5 continuation octets, leading zeros and all.
    decodeBlock(decoder, blockOf(0x3f, 0x81, 0x80, 0x80, 0x80, 0x00));
    expect(decoder.dynamicTableMaxSize).toBe(32);
  });

  it('refuses a maxTableSize that is not a size', () => {
    expect(() => new HpackDecoder(-1)).toThrow(RangeError);
    expect(() => new HpackDecoder(1.5)).toThrow(RangeError);
    expect(() => new HpackDecoder(2 ** 31)).toThrow(RangeError);
  });

  it('refuses a range outside the buffer (a caller bug, not a malformed block)', () => {
    const out: string[] = [];
    expect(() => new HpackDecoder().decode(Buffer.from([0x82]), 0, 2, out)).toThrow(RangeError);
    expect(() => new HpackDecoder().decode(Buffer.from([0x82]), 1, 0, out)).toThrow(RangeError);
  });
});

const REQUEST_1: Field[] = [
  [':method', 'GET'],
  [':scheme', 'http'],
  [':path', '/'],
  [':authority', 'www.example.com'],
];

describe('HpackDecoder refuses malformed blocks with HpackError', () => {
  const withOneEntry = (): HpackDecoder => {
    const decoder = new HpackDecoder();
    decodeBlock(decoder, blockOf(0x40, hpackString('x-a'), hpackString('1')));
    return decoder;
  };

  it.each([
    ['an indexed field with index 0', [0x80]],
    ['index 0 after valid fields', [0x82, 0x86, 0x80]],
    ['an index past an empty dynamic table', [0xbe]],
    ['an index past the static table, large', [0xff, 0x80, 0x10]],
    ['a literal name index past the table (6-bit prefix)', [0x7e, 0x01, 0x61]],
    ['a literal name index past the table (4-bit prefix)', [0x0f, 0x30, 0x01, 0x61]],
    ['a never-indexed literal name index past the table', [0x1f, 0x30, 0x01, 0x61]],
    ['an integer cut off after its prefix', [0xff]],
    ['an integer cut off after a continuation octet', [0xff, 0x80]],
    ['an integer cut off in a string length', [0x00, 0x7f, 0x80]],
    ['an index of 2^31', hpackInteger(2 ** 31, 7, 0x80)],
    ['an integer of 2^32 + 126', [0xff, 0xff, 0xff, 0xff, 0xff, 0x0f]],
    ['an integer of 6 continuation octets, even if small', [0x3f, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00]],
    ['a string length past the end of the block', [0x00, 0x05, 0x61]],
    ['a value length past the end of the block', [0x00, 0x01, 0x61, 0x02, 0x62]],
    ['a string length of 2^31 - 1', [0x00, ...hpackInteger(0x7fffffff, 7)]],
    ['a string length of 2^31', [0x00, ...hpackInteger(2 ** 31, 7)]],
    ['a literal with no name string', [0x40]],
    ['a literal with no value string', [0x41]],
    ['a literal new name with no value', [0x00, 0x01, 0x61]],
    ['a Huffman string padded with 8 one-bits', [0x00, 0x82, ...packBits(huffmanBits([0x61])), 0xff, 0x00]],
    ['a Huffman string padded with zeros', [0x00, 0x81, ...packBits(huffmanBits([0x61]), '0'), 0x00]],
    ['a Huffman value padded with 101', [0x04, 0x81, 0x05]],
    ['EOS inside a Huffman string', [0x00, 0x00, 0x85, ...packBits(huffmanBits([0x61, 256, 0x61]))]],
    ['a table size update above the advertised 4096', [...hpackInteger(4097, 5, 0x20)]],
    ['a table size update far above it', [0x3f, 0xff, 0xff, 0xff, 0xff, 0x07]],
    ['a table size update after a field', [0x82, 0x20]],
    ['a table size update after a literal', [0x00, 0x00, 0x00, 0x3f, 0xe1, 0x1f]],
    ['a table size update between fields after one at the start', [0x20, 0x82, 0x20, 0x82]],
  ])('%s', (_case, octets) => {
    expect(() => decodeBlock(new HpackDecoder(), Buffer.from(octets))).toThrow(HpackError);
  });

  it('an index past a dynamic table of one entry', () => {
    expect(decodeBlock(withOneEntry(), Buffer.from([0xbe])).fields).toEqual([['x-a', '1']]);
    expect(() => decodeBlock(withOneEntry(), Buffer.from([0xbf]))).toThrow(HpackError);
    expect(() => decodeBlock(withOneEntry(), Buffer.from([0x7f, 0x00, 0x00]))).toThrow(HpackError);
  });

  it('a table size update above a smaller advertised size, at the start of a block', () => {
    expect(() => decodeBlock(new HpackDecoder(256), blockOf(hpackInteger(257, 5, 0x20)))).toThrow(HpackError);
    expect(() => decodeBlock(new HpackDecoder(0), Buffer.from([0x21]))).toThrow(HpackError);
    decodeBlock(new HpackDecoder(256), blockOf(hpackInteger(256, 5, 0x20)));
  });

  // Every integer is also bounded by what it counts (the table, the block, the advertised size): this checks the bound of its own.
  it('an integer above 2^31 - 1, as too large, whatever it counts', () => {
    expect(() => decodeBlock(new HpackDecoder(), blockOf(hpackInteger(2 ** 31, 7, 0x80)))).toThrow(/integer 2147483648 is too large/);
    expect(() => decodeBlock(new HpackDecoder(0x7fffffff), blockOf(hpackInteger(2 ** 31, 5, 0x20)))).toThrow(/too large/);
  });

  it('an index into entries evicted by a size update', () => {
    const decoder = withOneEntry();
    expect(() => decodeBlock(decoder, Buffer.from([0x20, 0xbe]))).toThrow(HpackError);
  });
});

/**
 * A reference model of the dynamic table (a plain array, newest first) and
 * an encoder that writes blocks against it: random blocks of every
 * representation, with the fields and table the decoder must end up with.
 */
describe('HpackDecoder against a model of the dynamic table', () => {
  type Op =
    | { kind: 'indexed'; pick: number }
    | { kind: 'literal'; mode: 0x40 | 0x00 | 0x10; namePick: number | undefined; name: string; value: string; huffman: boolean }
    // An entry of exactly the room left, or the whole table, or one octet more: §4.4's boundaries.
    | { kind: 'fill'; size: 'room' | 'room+1' | 'capacity' | 'capacity+1' };

  const latin1 = fc
    .array(fc.oneof(fc.integer({ min: 0x20, max: 0x7e }), fc.integer({ min: 0, max: 0xff })), { maxLength: 120 })
    .map((codes) => String.fromCharCode(...codes));
  const fieldOp: fc.Arbitrary<Op> = fc.oneof(
    fc.record({ kind: fc.constant('indexed' as const), pick: fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }) }),
    fc.record({
      kind: fc.constant('literal' as const),
      mode: fc.constantFrom(0x40 as const, 0x40 as const, 0x00 as const, 0x10 as const),
      namePick: fc.option(fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }), { nil: undefined }),
      name: fc.oneof(fc.constantFrom('x-a', 'x-b', 'content-type'), latin1),
      value: latin1,
      huffman: fc.boolean(),
    }),
    fc.record({
      kind: fc.constant('fill' as const),
      size: fc.constantFrom('room' as const, 'room+1' as const, 'capacity' as const, 'capacity+1' as const),
    }),
  );
  // A size update to a fraction of the advertised size, or to the table's current size or one octet under it (§4.3's boundary).
  const update = fc.oneof(fc.double({ min: 0, max: 1, noNaN: true }), fc.constantFrom('current' as const, 'current-1' as const));
  const block = fc.record({
    updates: fc.array(update, { maxLength: 2 }),
    fields: fc.array(fieldOp, { maxLength: 25 }),
  });

  it('decodes what the model encodes and ends each block with the same table', () => {
    fc.assert(
      fc.property(fc.constantFrom(0, 64, 256, 4096, 65536), fc.array(block, { minLength: 1, maxLength: 15 }), (maxSize, blocks) => {
        const decoder = new HpackDecoder(maxSize);
        let table: Field[] = [];
        let capacity: number = maxSize;
        const evictTo = (target: number): void => {
          while (sizeOf(table) > target) table.pop();
        };
        for (const { updates, fields } of blocks) {
          const octets: number[] = [];
          const expected: Field[] = [];
          for (const to of updates) {
            const size = sizeOf(table);
            capacity = to === 'current' ? size : to === 'current-1' ? Math.max(0, size - 1) : Math.floor(to * maxSize);
            octets.push(...hpackInteger(capacity, 5, 0x20));
            evictTo(capacity);
          }
          for (const op of fields) {
            const indexCount = HPACK_STATIC_TABLE.length + table.length;
            const entryAt = (index: number): Field => {
              const entry = HPACK_STATIC_TABLE[index - 1];
              return entry ? [entry.name, entry.value] : table[index - 1 - HPACK_STATIC_TABLE.length]!;
            };
            if (op.kind === 'indexed') {
              const index = 1 + Math.floor(op.pick * indexCount);
              octets.push(...hpackInteger(index, 7, 0x80));
              expected.push(entryAt(index));
            } else if (op.kind === 'fill') {
              const room = capacity - sizeOf(table);
              const entrySize = { room, 'room+1': room + 1, capacity, 'capacity+1': capacity + 1 }[op.size];
              const value = 'v'.repeat(Math.max(0, entrySize - 32 - 'x-fill'.length));
              octets.push(0x40, ...hpackString('x-fill'), ...hpackString(value));
              expected.push(['x-fill', value]);
              evictTo(Math.max(0, capacity - sizeOf([['x-fill', value]])));
              if (sizeOf([['x-fill', value]]) <= capacity) table = [['x-fill', value], ...table];
            } else {
              const nameIndex = op.namePick === undefined ? 0 : 1 + Math.floor(op.namePick * indexCount);
              const name = nameIndex === 0 ? op.name : entryAt(nameIndex)[0];
              octets.push(...hpackInteger(nameIndex, op.mode === 0x40 ? 6 : 4, op.mode));
              if (nameIndex === 0) octets.push(...hpackString(name, op.huffman));
              octets.push(...hpackString(op.value, !op.huffman));
              expected.push([name, op.value]);
              if (op.mode === 0x40) {
                const entrySize = sizeOf([[name, op.value]]);
                evictTo(Math.max(0, capacity - entrySize));
                if (entrySize <= capacity) table = [[name, op.value], ...table];
              }
            }
          }
          expect(decodeBlock(decoder, Buffer.from(octets))).toEqual({ fields: expected, listSize: sizeOf(expected) });
          expect(decoder.dynamicEntries()).toEqual(table);
          expect(decoder.dynamicTableSize).toBe(sizeOf(table));
          expect(decoder.dynamicTableMaxSize).toBe(capacity);
        }
      }),
      { numRuns: 300 },
    );
  });
});

describe('HpackDecoder on random and mutated blocks', () => {
  const VALID_BLOCKS = [
    '400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572',
    '1008 7061 7373 776f 7264 0673 6563 7265 74',
    '8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff',
    '8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf',
    '4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6 2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 ' +
      'e9ae 82ae 43d3',
    '88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab 77ad 94e7 821d d7f2 e6c7 b335 dfdf cd5b ' +
      '3960 d5af 2708 7f36 72c1 ab27 0fb5 291f 9587 3160 65c0 03ed 4ee5 b106 3d50 07',
    '3fe1 0120 3f81 0182 400a 6375 7374 6f6d 2d6b 6579 00',
  ].map(hex);

  /** Decodes, and checks that success leaves a consistent result; anything but HpackError fails the test. */
  function decodeOrRefuse(decoder: HpackDecoder, block: Buffer): void {
    const out: string[] = [];
    let listSize: number;
    try {
      listSize = decoder.decode(block, 0, block.length, out);
    } catch (error) {
      if (!(error instanceof HpackError)) throw error;
      return;
    }
    expect(out.length % 2).toBe(0);
    expect(listSize).toBe(sizeOf(pairs(out)));
    expect(decoder.dynamicTableSize).toBe(sizeOf(decoder.dynamicEntries()));
    expect(decoder.dynamicTableSize).toBeLessThanOrEqual(decoder.dynamicTableMaxSize);
  }

  it('random octets: decoded or refused with HpackError, by a fresh decoder and one carrying a table', () => {
    const carried = new HpackDecoder();
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 300 }), fc.constantFrom(0, 256, 4096), (octets, maxSize) => {
        const block = Buffer.from(octets);
        decodeOrRefuse(new HpackDecoder(maxSize), block);
        decodeOrRefuse(carried, block);
      }),
      { numRuns: 4000 },
    );
  });

  it('mutated valid blocks: decoded or refused with HpackError', () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...VALID_BLOCKS),
        fc.array(fc.record({ at: fc.nat(), octet: fc.integer({ min: 0, max: 255 }), how: fc.constantFrom('set', 'xor', 'insert') }), {
          minLength: 1,
          maxLength: 4,
        }),
        fc.option(fc.nat(), { nil: undefined }),
        (valid, mutations, cutAt) => {
          const octets = [...valid];
          for (const { at, octet, how } of mutations) {
            const i = at % (octets.length + 1);
            if (how === 'insert') octets.splice(i, 0, octet);
            else if (i < octets.length) octets[i] = how === 'set' ? octet : octets[i]! ^ (1 << (octet % 8));
          }
          const block = Buffer.from(cutAt === undefined ? octets : octets.slice(0, cutAt % (octets.length + 1)));
          const decoder = new HpackDecoder(256);
          decodeOrRefuse(decoder, hex('4803 3330 3258 0770 7269 7661 7465'));
          decodeOrRefuse(decoder, block);
          decodeOrRefuse(decoder, block);
        },
      ),
      { numRuns: 4000 },
    );
  });
});

/**
 * node:http2's client is nghttp2: its HPACK encoder Huffman-codes a string
 * when that is shorter, indexes nearly every field into its dynamic table
 * (never `sensitiveHeaders`, nor short cookie and authorization values),
 * and answers a smaller SETTINGS_HEADER_TABLE_SIZE with size updates. A fake
 * server on a plain socket reads its header blocks off the wire.
 */
describe('HpackDecoder against node:http2 (nghttp2) as the encoder', () => {
  const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');
  const HEADERS = 0x1;
  const SETTINGS = 0x4;
  const CONTINUATION = 0x9;
  const END_STREAM = 0x1;
  const ACK = 0x1;
  const END_HEADERS = 0x4;
  const PADDED = 0x8;
  const PRIORITY = 0x20;

  const frame = rawFrame;

  interface Captured {
    blocks: { streamId: number; block: Buffer }[];
    frameFlags: number[];
    continuations: number;
    /** Anything off in the client's frames; asserted once the run ends. */
    problems: string[];
  }

  /** A server that reads the client's header blocks and answers each request `:status: 200`, END_STREAM. */
  async function fakeServer(headerTableSize: number | undefined): Promise<{ port: number; captured: Captured; close(): Promise<void> }> {
    const captured: Captured = { blocks: [], frameFlags: [], continuations: 0, problems: [] };
    const sockets = new Set<net.Socket>();
    const server = net.createServer((socket) => {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
      socket.on('error', () => undefined);
      const settings = Buffer.alloc(headerTableSize === undefined ? 0 : 6);
      if (headerTableSize !== undefined) {
        settings.writeUInt16BE(0x1, 0); // SETTINGS_HEADER_TABLE_SIZE
        settings.writeUInt32BE(headerTableSize, 2);
      }
      socket.write(frame(SETTINGS, 0, 0, settings));
      let buffered = Buffer.alloc(0);
      let prefaceRead = false;
      let pending: { streamId: number; parts: Buffer[] } | undefined;
      socket.on('data', (chunk: Buffer) => {
        buffered = Buffer.concat([buffered, chunk]);
        if (!prefaceRead) {
          if (buffered.length < PREFACE.length) return;
          if (!buffered.subarray(0, PREFACE.length).equals(PREFACE)) captured.problems.push('no client preface');
          buffered = buffered.subarray(PREFACE.length);
          prefaceRead = true;
        }
        while (buffered.length >= 9 && buffered.length >= 9 + buffered.readUIntBE(0, 3)) {
          const length = buffered.readUIntBE(0, 3);
          const type = buffered[3]!;
          const flags = buffered[4]!;
          const streamId = buffered.readUInt32BE(5) & 0x7fffffff;
          const payload = buffered.subarray(9, 9 + length);
          buffered = buffered.subarray(9 + length);
          if (pending && type !== CONTINUATION) captured.problems.push(`frame type ${type} inside a header block`);
          let fragment: Buffer | undefined;
          if (type === SETTINGS && (flags & ACK) === 0) {
            socket.write(frame(SETTINGS, ACK, 0, Buffer.alloc(0)));
          } else if (type === HEADERS) {
            captured.frameFlags.push(flags);
            if ((flags & END_STREAM) === 0) captured.problems.push(`stream ${streamId}: HEADERS without END_STREAM`);
            let start = 0;
            let end = payload.length;
            if (flags & PADDED) {
              start = 1;
              end -= payload[0]!;
            }
            if (flags & PRIORITY) start += 5;
            fragment = payload.subarray(start, end);
            pending = { streamId, parts: [] };
          } else if (type === CONTINUATION) {
            captured.continuations += 1;
            if (pending?.streamId !== streamId) captured.problems.push(`stray CONTINUATION on stream ${streamId}`);
            fragment = payload;
          }
          if (fragment && pending) {
            pending.parts.push(fragment);
            if (flags & END_HEADERS) {
              captured.blocks.push({ streamId: pending.streamId, block: Buffer.concat(pending.parts) });
              socket.write(frame(HEADERS, END_HEADERS | END_STREAM, pending.streamId, Buffer.from([0x88])));
              pending = undefined;
            }
          }
        }
      });
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    return {
      port: (server.address() as net.AddressInfo).port,
      captured,
      async close() {
        for (const socket of sockets) socket.destroy();
        server.close();
        await once(server, 'close');
      },
    };
  }

  type Headers = Record<string, string | string[]>;

  /** Requests with random names and values, some repeated across requests so that nghttp2 indexes them. */
  function randomRequests(seed: number, count: number, authority: string): { headers: Headers; sensitive: string[]; expected: Field[] }[] {
    const random = prng(seed);
    const below = (n: number): number => Math.floor(random() * n);
    const chance = (p: number): boolean => random() < p;
    const TOKEN = 'abcdefghijklmnopqrstuvwxyz0123456789-_.!#$%&*+^`|~';
    const token = (length: number): string => Array.from({ length }, () => TOKEN[below(TOKEN.length)]).join('');
    const value = (): string => {
      const length = chance(0.15) ? below(301) : below(40);
      const latin1Share = chance(0.3) ? random() : 0;
      let text = '';
      for (let i = 0; i < length; i += 1) {
        text += String.fromCharCode(random() < latin1Share ? 0x80 + below(0x80) : 0x20 + below(0x5f));
      }
      return text;
    };
    const poolNames = Array.from({ length: 30 }, () => `x-${token(1 + below(20))}`);
    const poolPairs = Array.from({ length: 60 }, (): Field => [poolNames[below(poolNames.length)]!, value()]);
    const methods = ['GET', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS'];

    return Array.from({ length: count }, () => {
      const headers: Headers = {
        ':method': methods[below(methods.length)]!,
        ':path': chance(0.5) ? '/authz.v1/Check' : `/${token(below(60))}`,
        ':scheme': 'http',
        ':authority': authority,
      };
      const add = (name: string, text: string): void => {
        const existing = headers[name];
        if (existing === undefined) headers[name] = text;
        else headers[name] = [...(Array.isArray(existing) ? existing : [existing]), text];
      };
      const big = chance(0.02);
      const fieldCount = big ? 60 + below(40) : below(14);
      for (let i = 0; i < fieldCount; i += 1) {
        const kind = random();
        if (big) add(`x-big-${token(1 + below(10))}`, String.fromCharCode(...Array.from({ length: 300 }, () => 0x80 + below(0x80))));
        else if (kind < 0.4) add(...poolPairs[below(poolPairs.length)]!);
        else if (kind < 0.65) add(poolNames[below(poolNames.length)]!, value());
        else if (kind < 0.9) add(`x-${token(1 + below(30))}`, value());
        else if (headers['authorization'] === undefined && chance(0.5)) headers['authorization'] = `Bearer ${token(below(40))}`;
        else if (headers['user-agent'] === undefined) headers['user-agent'] = chance(0.8) ? 'grpc-node-js/1.14.7' : value();
      }
      const regular = Object.keys(headers).filter((name) => !name.startsWith(':'));
      const sensitive = chance(0.15) ? regular.filter(() => chance(0.4)) : [];
      const expected: Field[] = Object.entries(headers).flatMap(([name, v]) =>
        (Array.isArray(v) ? v : [v]).map((text): Field => [name, text]),
      );
      return { headers, sensitive, expected };
    });
  }

  async function run(options: {
    seed: number;
    requests: number;
    headerTableSize?: number;
    clientOptions?: http2.ClientSessionOptions;
    priority?: boolean;
    /** Sent twice after the random requests. */
    repeated?: Headers;
  }): Promise<{ captured: Captured; expected: Map<number, Field[]> }> {
    const server = await fakeServer(options.headerTableSize);
    const authority = `127.0.0.1:${server.port}`;
    const client = http2.connect(`http://${authority}`, options.clientOptions);
    client.on('error', () => undefined);
    const expected = new Map<number, Field[]>();
    try {
      // The client's encoder learns the table size from the server's SETTINGS; a
      // request sent before that uses the default 4096, which a smaller decoder
      // cannot follow (see the HpackDecoder constructor).
      await once(client, 'remoteSettings');
      const requests = randomRequests(options.seed, options.requests, authority);
      if (options.repeated) {
        const headers: Headers = { ':method': 'POST', ':path': '/', ':scheme': 'http', ':authority': authority, ...options.repeated };
        const expectedFields = Object.entries(headers).map(([name, value]): Field => [name, String(value)]);
        requests.push({ headers, sensitive: [], expected: expectedFields }, { headers, sensitive: [], expected: expectedFields });
      }
      const random = prng(options.seed ^ 0x5eed);
      for (let i = 0; i < requests.length; i += 25) {
        await Promise.all(
          requests.slice(i, i + 25).map(
            ({ headers, sensitive, expected: fields }) =>
              new Promise<void>((resolve, reject) => {
                const requestHeaders: http2.OutgoingHttpHeaders = { ...headers, [http2.sensitiveHeaders]: sensitive };
                const requestOptions: http2.ClientSessionRequestOptions = { endStream: true };
                if (options.priority && random() < 0.5) requestOptions.weight = 1 + Math.floor(random() * 256);
                const stream = client.request(requestHeaders, requestOptions);
                stream.on('error', reject);
                // The id is there at once on a connected session (node emits 'ready' inside request()).
                if (stream.id !== undefined) expected.set(stream.id, fields);
                else stream.once('ready', () => expected.set(stream.id!, fields));
                stream.resume();
                stream.on('close', () =>
                  stream.rstCode === http2.constants.NGHTTP2_NO_ERROR ? resolve() : reject(new Error(`RST ${stream.rstCode}`)),
                );
              }),
          ),
        );
      }
    } finally {
      client.close();
      await server.close();
    }
    expect(server.captured.problems).toEqual([]);
    expect(server.captured.blocks).toHaveLength(options.requests + (options.repeated ? 2 : 0));
    return { captured: server.captured, expected };
  }

  function decodeAll(decoder: HpackDecoder, captured: Captured, expected: Map<number, Field[]>): void {
    for (const { streamId, block } of captured.blocks) {
      const fields = expected.get(streamId);
      expect(fields).toBeDefined();
      const { fields: decoded, listSize } = decodeBlock(decoder, block);
      if (JSON.stringify(decoded) !== JSON.stringify(fields)) {
        // The whole request in the failure message, for the seed's sake.
        expect({ streamId, decoded }).toEqual({ streamId, decoded: fields });
      }
      expect(listSize).toBe(sizeOf(fields!));
    }
  }

  it('decodes several hundred requests on one connection, default 4096-octet table', async () => {
    const { captured, expected } = await run({
      seed: 0x7541,
      requests: 500,
      repeated: {
        'content-type': 'application/grpc',
        te: 'trailers',
        'grpc-timeout': '250m',
        'x-request-id': '9d1c5b52-3a8f-4e0c-a1b7-6f2e8c4d9a01',
        'x-envoy-expected-rq-timeout-ms': '250',
      },
    });
    const decoder = new HpackDecoder();
    decodeAll(decoder, captured, expected);
    expect(decoder.dynamicTableMaxSize).toBe(4096);
    // nghttp2 filled the table: most of it in use, entries indexed.
    expect(decoder.dynamicTableSize).toBeGreaterThan(2048);
    expect(captured.continuations).toBeGreaterThan(0);
    // The same gRPC call twice: nghttp2 sends the second all as indexes, one octet a field, every one from the tables.
    const last = captured.blocks[captured.blocks.length - 1]!;
    expect(last.block.length).toBe(expected.get(last.streamId)!.length);
  });

  it('follows a 256-octet SETTINGS_HEADER_TABLE_SIZE: size updates and evictions', async () => {
    const { captured, expected } = await run({ seed: 256, requests: 300, headerTableSize: 256 });
    // nghttp2 opens its first block with the size update.
    expect(captured.blocks[0]!.block[0]! & 0xe0).toBe(0x20);
    const decoder = new HpackDecoder(256);
    decodeAll(decoder, captured, expected);
    expect(decoder.dynamicTableMaxSize).toBe(256);
    expect(decoder.dynamicTableSize).toBeLessThanOrEqual(256);
  });

  it('follows a SETTINGS_HEADER_TABLE_SIZE of 0: no dynamic table at all', async () => {
    const { captured, expected } = await run({ seed: 0, requests: 200, headerTableSize: 0 });
    expect(captured.blocks[0]!.block[0]).toBe(0x20);
    const decoder = new HpackDecoder(0);
    decodeAll(decoder, captured, expected);
    expect(decoder.dynamicTableSize).toBe(0);
  });

  it('decodes with a larger advertised table than the encoder uses (65536: nghttp2 keeps to 4096)', async () => {
    const { captured, expected } = await run({ seed: 65536, requests: 200, headerTableSize: 65536 });
    decodeAll(new HpackDecoder(65536), captured, expected);
  });

  // Node 22 and 24 (their nghttp2) no longer send priority, whatever weight a request asks for (RFC 9113 deprecated
  // it): HEADERS with the PRIORITY flag are built by hand in http2-connection.test.ts.
  it('decodes blocks from padded HEADERS, as the frame layer hands them over', async () => {
    const { captured, expected } = await run({
      seed: 8,
      requests: 200,
      clientOptions: { paddingStrategy: http2.constants.PADDING_STRATEGY_MAX },
      priority: true,
    });
    expect(captured.frameFlags.some((flags) => flags & PADDED)).toBe(true);
    decodeAll(new HpackDecoder(), captured, expected);
  });
});

describe('HpackDecoder past the header list limit', () => {
  const LIMIT = 16 * 1024;
  const BIG = 'v'.repeat(4000);
  /**
   * A 4,037-octet entry, then 20,000 one-octet references to it (80 MB of headers from 20 KB on the wire), then the
   * representations that still matter to the table: literals with incremental indexing (new name, static name,
   * dynamic name, Huffman), and those that do not (without indexing, never indexed, static fields).
   */
  const bomb = blockOf(
    [0x40, ...hpackString('x-big'), ...hpackString(BIG)],
    new Array<number>(20_000).fill(0xbe),
    [0x82, 0x00, ...hpackString('x-skipped'), ...hpackString('s')],
    // Literals without indexing and a new name, passed over octet by octet: empty, never indexed, Huffman-coded, and
    // a name too long for a one-octet length.
    [0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10, ...hpackString('x-never'), ...hpackString('n')],
    [0x00, ...hpackString('x-huff', true), ...hpackString('value', true)],
    [0x00, ...hpackString('x'.repeat(200)), ...hpackString('long')],
    [0x14, ...hpackString('/never-indexed')],
    [0x40, ...hpackString('x-after'), ...hpackString('1')],
    [0x44, ...hpackString('/indexed-path')],
    [0x7f, 0x00, ...hpackString('2')], // Name: index 63 (x-after, now one older), value '2'.
    [0x40, ...hpackString('x-huffman', true), ...hpackString('h', true)],
  );

  it('stops materialising fields once the decoded list passes the limit, counting what references produce', () => {
    const decoder = new HpackDecoder();
    const out: string[] = [];
    const listSize = decoder.decode(bomb, 0, bomb.length, out, LIMIT);
    expect(listSize).toBeGreaterThan(LIMIT);
    // Fields up to the first past the limit: x-big and its first references (4,037 octets each), no more.
    expect(out.length / 2).toBe(Math.floor(LIMIT / 4037) + 1);
    expect(pairs(out).every(([name, value]) => name === 'x-big' && value === BIG)).toBe(true);
  });

  it('keeps the dynamic table in step with the encoder, so the next block decodes as without the limit', () => {
    const limited = new HpackDecoder();
    limited.decode(bomb, 0, bomb.length, [], LIMIT);
    const unlimited = new HpackDecoder();
    unlimited.decode(bomb, 0, bomb.length, []);
    expect(limited.dynamicEntries()).toEqual(unlimited.dynamicEntries());
    expect(limited.dynamicTableSize).toBe(unlimited.dynamicTableSize);
    expect(limited.dynamicEntries()[0]).toEqual(['x-huffman', 'h']);
    const next = blockOf(0xbe, 0xbf, 0xc0, 0xc1);
    expect(decodeBlock(limited, next)).toEqual(decodeBlock(unlimited, next));
  });

  it('stops at the first forbidden field for a caller that refuses such a block, keeping the table in step', () => {
    const block = blockOf(
      [0x82],
      [0x00, 0x00, 0x00], // an empty name: the request is malformed from here
      new Array<number>(3 * 1000).fill(0x00),
      [0x40, ...hpackString('x-after'), ...hpackString('1')],
    );
    const stopping = new HpackDecoder();
    const out: string[] = [];
    stopping.decode(block, 0, block.length, out, LIMIT, true);
    expect(stopping.hasInvalidField).toBe(true);
    expect(pairs(out)).toEqual([
      [':method', 'GET'],
      ['', ''],
    ]);
    const reading = new HpackDecoder();
    const all: string[] = [];
    reading.decode(block, 0, block.length, all);
    expect(reading.hasInvalidField).toBe(true);
    expect(all.length / 2).toBe(1 + 1 + 1000 + 1);
    expect(stopping.dynamicEntries()).toEqual([['x-after', '1']]);
    expect(stopping.dynamicEntries()).toEqual(reading.dynamicEntries());
  });

  it('still refuses what is malformed past the limit: a size update after a field, an index past the table, a cut string', () => {
    const head = blockOf([0x40, ...hpackString('x-big'), ...hpackString(BIG)], new Array<number>(5).fill(0xbe));
    for (const tail of [
      [0x3f, 0x01],
      [0xff, 0x10],
      [0x00, 0x01, 0x61, 0x05, 0x62], // a value running past the block's end
      [0x00, 0x05, 0x61], // a name running past it
      [0x10, 0x01, 0x61], // a value missing
    ]) {
      const block = Buffer.concat([head, Buffer.from(tail)]);
      expect(() => new HpackDecoder().decode(block, 0, block.length, [], LIMIT)).toThrow(HpackError);
    }
  });
});
