/**
 * The HPACK decoder (RFC 7541) for request header blocks.
 *
 * Why not node:http2's: it hands every header value that is not a static
 * table constant to V8 as an external string, which goes straight to old
 * space, and the major GCs that collect them are the service's tail
 * latency. Here every string is an ordinary latin1 heap string (one char
 * per octet) made once, when a literal is read: the dynamic table keeps the
 * strings themselves, so a field indexed from it (Envoy and nghttp2 index
 * nearly every header after a connection's first request) is pushed without
 * allocating anything. The exception is `:path`, which nghttp2 always sends
 * as a literal without indexing: one string per request.
 */
import { HPACK_STATIC_TABLE } from './hpack-static-table';
import { huffmanDecode, huffmanDecodedLengthBound } from './huffman';

/** A header block that cannot be decoded: the connection must end with GOAWAY(COMPRESSION_ERROR). */
export class HpackError extends Error {}

const STATIC_COUNT = HPACK_STATIC_TABLE.length;
// Indexed by HPACK index (1–61), so a lookup is one load; slot 0 is never read.
const STATIC_NAMES = ['', ...HPACK_STATIC_TABLE.map((entry) => entry.name)];
const STATIC_VALUES = ['', ...HPACK_STATIC_TABLE.map((entry) => entry.value)];

/** §4.1: an entry's size is its name's and value's octets plus 32, an estimate of the overhead of keeping it. */
const ENTRY_OVERHEAD = 32;
/** The largest integer (§5.1) accepted: an index, string length or table size above it is an attack, not a header. */
const MAX_INTEGER = 0x7fffffff;
/** Continuation octets after the prefix: 5 carry 35 bits, more than MAX_INTEGER needs. */
const MAX_INTEGER_CONTINUATIONS = 5;
const INITIAL_RING_SLOTS = 16;

/** RFC 9113 §8.2.2: fields of HTTP/1.1's connection, which make an HTTP/2 message malformed (te aside: its value decides). */
const CONNECTION_SPECIFIC_NAMES = new Set(['connection', 'proxy-connection', 'keep-alive', 'transfer-encoding', 'upgrade']);

/** The one static table name a request may not carry (a connection-specific field). */
const TRANSFER_ENCODING_INDEX = STATIC_NAMES.indexOf('transfer-encoding');

/**
 * RFC 9113 §8.2: a field name is lower case, of visible ASCII but `:` (a pseudo-header's first character), and not
 * a connection-specific field. Read only for names decoded as literals, or all names while the table holds a bad one.
 */
function isValidFieldName(name: string): boolean {
  if (name.length === 0) return false;
  for (let i = 0; i < name.length; i += 1) {
    const code = name.charCodeAt(i);
    if (code <= 0x20 || (code >= 0x41 && code <= 0x5a) || code >= 0x7f || (code === 0x3a && i !== 0)) return false;
  }
  return !CONNECTION_SPECIFIC_NAMES.has(name);
}

/**
 * RFC 9113 §8.2.1: a field value has no NUL, CR or LF anywhere, and no space or tab first or last (as nghttp2 and
 * node:http2 check them). Read only for values decoded as literals, or all values while the table holds a bad one.
 */
function isValidFieldValue(value: string): boolean {
  const last = value.length - 1;
  if (last < 0) return true;
  const first = value.charCodeAt(0);
  const final = value.charCodeAt(last);
  if (first === 0x20 || first === 0x09 || final === 0x20 || final === 0x09) return false;
  for (let i = 0; i <= last; i += 1) {
    const code = value.charCodeAt(i);
    if (code === 0x00 || code === 0x0a || code === 0x0d) return false;
  }
  return true;
}

function isValidField(name: string, value: string): boolean {
  return isValidFieldName(name) && isValidFieldValue(value);
}

/**
 * Huffman output goes here before it becomes a string. One for all
 * decoders: decode() runs to the end synchronously, so no two use it at once.
 * Grown to the largest string seen, which the frame layer's limit on a
 * header block bounds.
 */
let huffmanScratch = Buffer.allocUnsafeSlow(1024);

export class HpackDecoder {
  /** The advertised SETTINGS_HEADER_TABLE_SIZE: a size update above it is an error. */
  private readonly maxTableSize: number;
  /** The table's current maximum size, as the encoder last set it (§4.2). */
  private capacity: number;
  private size = 0;

  // The dynamic table, a ring: `head` is the newest entry's slot (HPACK
  // index 62), older entries sit at lower slots, wrapping. The slot count is
  // a power of two, grown when full; eviction only moves the tail.
  private names: string[] = new Array<string>(INITIAL_RING_SLOTS).fill('');
  private values: string[] = new Array<string>(INITIAL_RING_SLOTS).fill('');
  private mask = INITIAL_RING_SLOTS - 1;
  private head = 0;
  private count = 0;
  /**
   * Entries whose name or value HTTP/2 forbids: only a broken or hostile encoder adds one, so while
   * there are none (always, from Envoy or grpc-js) a field taken from the table needs no look.
   */
  private invalidFieldsInTable = 0;

  /** The last block decoded has a field name or value HTTP/2 forbids (§8.2): the request is malformed, its stream reset. */
  hasInvalidField = false;

  /** Where the integer or string just read ended: read helpers advance it instead of returning a pair. */
  private cursor = 0;

  /**
   * maxTableSize: the SETTINGS_HEADER_TABLE_SIZE this side advertises (default 4096); size updates above it are errors.
   *
   * The table starts at that size, as RFC 7541 Appendix C does. A peer
   * encodes for the protocol's initial 4096 until it has read this side's
   * SETTINGS, so with less than 4096 advertised a block sent before then can
   * refer to entries this table has already evicted (an index past the table:
   * HpackError, never a wrong field, since this table then holds the newest
   * of the peer's entries).
   */
  constructor(maxTableSize = 4096) {
    if (!Number.isInteger(maxTableSize) || maxTableSize < 0 || maxTableSize > MAX_INTEGER) {
      throw new RangeError(`maxTableSize must be an integer from 0 to ${MAX_INTEGER}, not ${maxTableSize}`);
    }
    this.maxTableSize = maxTableSize;
    this.capacity = maxTableSize;
  }

  /**
   * Decodes one complete header block (HEADERS + CONTINUATION payloads joined, padding/priority already removed)
   * from block[start, end). Pushes name, value, name, value, … onto `out` (which the caller empties beforehand).
   * Returns the header list size as RFC 7541 §4.1/RFC 9113 §6.5.2 count it: the sum over fields of
   * name octets + value octets + 32.
   * Throws HpackError on anything malformed. Must update the dynamic table even when the caller will then refuse the stream.
   *
   * Once the list passes `maxListBytes` (counting what references to the table produce, not the bytes on the wire:
   * a 64 KiB block of references to one 4 KiB entry is a quarter of a gigabyte of headers), no more fields are pushed
   * or checked and no string is made but those the table keeps: the rest of the block is only read to keep the table
   * in step, as Go's x/net/http2 does, so that the stream alone is refused and the connection stays usable. The size
   * returned is then above `maxListBytes` (not necessarily the whole list's).
   *
   * With `stopAtInvalidField` (a caller that refuses a block with a field HTTP/2 forbids), the same happens at the
   * first such field: `hasInvalidField` is then set, and `out` and the size end with that field.
   */
  decode(block: Buffer, start: number, end: number, out: string[], maxListBytes = Infinity, stopAtInvalidField = false): number {
    if (start < 0 || end > block.length || start > end) {
      throw new RangeError(`block range [${start}, ${end}) is outside a buffer of ${block.length} octets`);
    }
    let listSize = 0;
    let invalidField = false;
    // §4.2 allows table size updates only before the block's first field.
    let fieldSeen = false;
    let pos = start;
    while (pos < end) {
      // Past the limit, or once a field has made the request malformed for a caller that refuses such a block, the
      // rest only keeps the table in step: a block of 5,000 empty names costs its table updates, not 5,000 fields.
      if (listSize > maxListBytes || (invalidField && stopAtInvalidField)) {
        this.skipRest(block, pos, end);
        break;
      }
      const first = block[pos]!;
      let name: string;
      let value: string;
      if (first >= 0x80) {
        // §6.1 indexed field: 1xxxxxxx.
        const index = this.readInteger(block, pos, end, 7);
        pos = this.cursor;
        if (index <= STATIC_COUNT) {
          if (index === 0) throw new HpackError('HPACK indexed field with index 0');
          if (index === TRANSFER_ENCODING_INDEX) invalidField = true;
          name = STATIC_NAMES[index]!;
          value = STATIC_VALUES[index]!;
        } else {
          const slot = this.dynamicSlot(index);
          name = this.names[slot]!;
          value = this.values[slot]!;
          if (this.invalidFieldsInTable !== 0 && !isValidField(name, value)) invalidField = true;
        }
      } else if (first >= 0x20 && first < 0x40) {
        // §6.3 dynamic table size update: 001xxxxx.
        const newCapacity = this.readInteger(block, pos, end, 5);
        pos = this.cursor;
        if (fieldSeen) throw new HpackError('HPACK dynamic table size update after a field in the same block');
        if (newCapacity > this.maxTableSize) {
          throw new HpackError(`HPACK dynamic table size update to ${newCapacity}, above the ${this.maxTableSize} advertised`);
        }
        this.capacity = newCapacity;
        this.evictDownTo(newCapacity);
        continue;
      } else {
        // §6.2 literals: 01xxxxxx with incremental indexing (6-bit name index),
        // 0000xxxx without indexing and 0001xxxx never indexed (4-bit). The two
        // last differ only for an intermediary re-encoding the field, which this is not.
        const indexing = first >= 0x40;
        const nameIndex = this.readInteger(block, pos, end, indexing ? 6 : 4);
        pos = this.cursor;
        let valid = true;
        if (nameIndex === 0) {
          name = this.readString(block, pos, end);
          pos = this.cursor;
          valid = isValidFieldName(name);
        } else if (nameIndex <= STATIC_COUNT) {
          name = STATIC_NAMES[nameIndex]!;
          valid = nameIndex !== TRANSFER_ENCODING_INDEX;
        } else {
          name = this.names[this.dynamicSlot(nameIndex)]!;
          valid = this.invalidFieldsInTable === 0 || isValidFieldName(name);
        }
        value = this.readString(block, pos, end);
        pos = this.cursor;
        if (valid) valid = isValidFieldValue(value);
        if (!valid) invalidField = true;
        if (indexing) this.insert(name, value, valid);
      }
      fieldSeen = true;
      out.push(name, value);
      listSize += name.length + value.length + ENTRY_OVERHEAD;
    }
    this.hasInvalidField = invalidField;
    return listSize;
  }

  /**
   * The rest of a block past the list limit: representations read for their effect on the table only. Indexed
   * fields and literals without indexing cost no string; the strings of literals with incremental indexing are made,
   * since the table keeps them, and the block's size bounds them.
   */
  private skipRest(block: Buffer, pos: number, end: number): void {
    // Indexed fields of one octet (index < 127): what a block of references is made of, checked without a call.
    const lastOneOctetIndex = Math.min(STATIC_COUNT + this.count, 126);
    while (pos < end) {
      const first = block[pos]!;
      if (first > 0x80 && first - 0x80 <= lastOneOctetIndex) {
        pos += 1;
        continue;
      }
      if (first === 0x00 || first === 0x10) {
        // A literal without indexing and a new name, both lengths in one octet (< 127, either Huffman bit): what a
        // block of empty or short names is made of, passed over without a call. Anything else takes the full path.
        const nameLength = (block[pos + 1] ?? 0x7f) & 0x7f;
        const valueAt = pos + 2 + nameLength;
        if (nameLength !== 0x7f && valueAt < end) {
          const valueLength = block[valueAt]! & 0x7f;
          const next = valueAt + 1 + valueLength;
          if (valueLength !== 0x7f && next <= end) {
            pos = next;
            continue;
          }
        }
      }
      if (first >= 0x80) {
        const index = this.readInteger(block, pos, end, 7);
        pos = this.cursor;
        if (index === 0) throw new HpackError('HPACK indexed field with index 0');
        if (index > STATIC_COUNT) this.dynamicSlot(index);
      } else if (first >= 0x20 && first < 0x40) {
        // Past the limit, a field has been seen: §4.2 allows none after it.
        throw new HpackError('HPACK dynamic table size update after a field in the same block');
      } else {
        const indexing = first >= 0x40;
        const nameIndex = this.readInteger(block, pos, end, indexing ? 6 : 4);
        pos = this.cursor;
        if (!indexing) {
          if (nameIndex === 0) pos = this.skipString(block, pos, end);
          else if (nameIndex > STATIC_COUNT) this.dynamicSlot(nameIndex);
          pos = this.skipString(block, pos, end);
          continue;
        }
        let name: string;
        if (nameIndex === 0) {
          name = this.readString(block, pos, end);
          pos = this.cursor;
        } else if (nameIndex <= STATIC_COUNT) {
          name = STATIC_NAMES[nameIndex]!;
        } else {
          name = this.names[this.dynamicSlot(nameIndex)]!;
        }
        const value = this.readString(block, pos, end);
        pos = this.cursor;
        this.insert(name, value, isValidField(name, value));
      }
    }
  }

  /** §5.2: a string literal's octets passed over, unread; returns where it ends. */
  private skipString(block: Buffer, pos: number, end: number): number {
    if (pos >= end) throw new HpackError('HPACK field cut off before its string');
    const length = this.readInteger(block, pos, end, 7);
    pos = this.cursor;
    if (length > end - pos) throw new HpackError(`HPACK string of ${length} octets runs past the end of the block`);
    return pos + length;
  }

  /** For inspection (tests, diagnostics): the dynamic table's size as §4.1 counts it. */
  get dynamicTableSize(): number {
    return this.size;
  }

  /** For inspection (tests, diagnostics): the dynamic table's maximum size, as the last size update set it. */
  get dynamicTableMaxSize(): number {
    return this.capacity;
  }

  /** For inspection (tests, diagnostics), never the hot path: a copy of the dynamic table, newest (index 62) first. */
  dynamicEntries(): [name: string, value: string][] {
    const entries: [string, string][] = [];
    for (let i = 0; i < this.count; i += 1) {
      const slot = (this.head - i) & this.mask;
      entries.push([this.names[slot]!, this.values[slot]!]);
    }
    return entries;
  }

  /** The ring slot of HPACK index `index` (> 61), which must name an entry of the dynamic table. */
  private dynamicSlot(index: number): number {
    const age = index - STATIC_COUNT - 1;
    if (age >= this.count) {
      throw new HpackError(`HPACK index ${index} is beyond the table (${STATIC_COUNT} static + ${this.count} dynamic entries)`);
    }
    return (this.head - age) & this.mask;
  }

  /**
   * §5.1 integer with a `prefixBits` prefix in block[pos]. Sets the cursor after it.
   * Arithmetic is in doubles, not 32-bit shifts: the continuation octets can
   * carry up to 35 bits before the bound is checked.
   */
  private readInteger(block: Buffer, pos: number, end: number, prefixBits: number): number {
    const prefixMax = (1 << prefixBits) - 1;
    let value = block[pos]! & prefixMax;
    pos += 1;
    if (value < prefixMax) {
      this.cursor = pos;
      return value;
    }
    let multiplier = 1;
    for (let continuation = 0; continuation < MAX_INTEGER_CONTINUATIONS; continuation += 1) {
      if (pos >= end) throw new HpackError('HPACK integer cut off by the end of the block');
      const octet = block[pos]!;
      pos += 1;
      value += (octet & 0x7f) * multiplier;
      if (octet < 0x80) {
        if (value > MAX_INTEGER) throw new HpackError(`HPACK integer ${value} is too large`);
        this.cursor = pos;
        return value;
      }
      multiplier *= 128;
    }
    throw new HpackError(`HPACK integer longer than ${MAX_INTEGER_CONTINUATIONS} continuation octets`);
  }

  /** §5.2 string literal at block[pos]. Sets the cursor after it. */
  private readString(block: Buffer, pos: number, end: number): string {
    if (pos >= end) throw new HpackError('HPACK field cut off before its string');
    const huffman = block[pos]! >= 0x80;
    const length = this.readInteger(block, pos, end, 7);
    pos = this.cursor;
    if (length > end - pos) throw new HpackError(`HPACK string of ${length} octets runs past the end of the block`);
    this.cursor = pos + length;
    if (!huffman) return block.toString('latin1', pos, pos + length);
    const bound = huffmanDecodedLengthBound(length);
    if (huffmanScratch.length < bound) huffmanScratch = Buffer.allocUnsafeSlow(Math.max(bound, 2 * huffmanScratch.length));
    const decoded = huffmanDecode(block, pos, pos + length, huffmanScratch);
    if (decoded < 0) throw new HpackError('HPACK Huffman string is malformed (EOS, or padding not up to 7 one-bits)');
    return huffmanScratch.toString('latin1', 0, decoded);
  }

  /** §4.4: evicts to make room, or empties the table for an entry larger than it (the field is still emitted). */
  private insert(name: string, value: string, valid: boolean): void {
    const entrySize = name.length + value.length + ENTRY_OVERHEAD;
    if (entrySize > this.capacity) {
      this.evictDownTo(0);
      return;
    }
    this.evictDownTo(this.capacity - entrySize);
    if (!valid) this.invalidFieldsInTable += 1;
    if (this.count === this.names.length) this.grow();
    this.head = (this.head + 1) & this.mask;
    this.names[this.head] = name;
    this.values[this.head] = value;
    this.count += 1;
    this.size += entrySize;
  }

  /** §4.3: drops the oldest entries until the table's size is at most `target`. */
  private evictDownTo(target: number): void {
    while (this.size > target) {
      const slot = (this.head - this.count + 1) & this.mask;
      this.size -= this.names[slot]!.length + this.values[slot]!.length + ENTRY_OVERHEAD;
      if (this.invalidFieldsInTable !== 0 && !isValidField(this.names[slot]!, this.values[slot]!)) this.invalidFieldsInTable -= 1;
      // Let the strings go: a slot is only rewritten when the ring wraps round to it.
      this.names[slot] = '';
      this.values[slot] = '';
      this.count -= 1;
    }
  }

  /** Doubles the ring, oldest entry first at slot 0. Entries are at least 32 octets, so this stops at maxTableSize / 32. */
  private grow(): void {
    const slots = this.names.length * 2;
    const names = new Array<string>(slots).fill('');
    const values = new Array<string>(slots).fill('');
    for (let i = 0; i < this.count; i += 1) {
      const slot = (this.head - this.count + 1 + i) & this.mask;
      names[i] = this.names[slot]!;
      values[i] = this.values[slot]!;
    }
    this.names = names;
    this.values = values;
    this.mask = slots - 1;
    this.head = this.count - 1;
  }
}
