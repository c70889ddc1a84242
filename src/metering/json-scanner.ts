/**
 * An incremental JSON scanner over bytes that keeps only what metering needs.
 *
 * Why not JSON.parse or a streaming JSON library: a response can be megabytes
 * of text or base64 images (Gemini image output, the Responses API's
 * `response.completed` repeating the whole output) with the usage object
 * last, and a stream can be split anywhere by Envoy. JSON.parse needs the
 * whole text; the streaming parsers on npm (@streamparser/json, stream-json,
 * jsonparse) still build every string token in memory, so one 5 MB string is
 * 5 MB held. This scanner validates the structure byte by byte and copies
 * only the values at the watched paths (each at most CAPTURE_LIMIT_BYTES),
 * so memory per response is bounded and CPU is one pass over the bytes.
 * Structure bytes are ASCII and never occur inside a multi-byte UTF-8
 * sequence, so a split anywhere, even inside a character, changes nothing.
 *
 * It accepts exactly what JSON.parse accepts (RFC 8259), up to MAX_DEPTH
 * nesting; test/unit/metering/json-scanner.test.ts holds it to JSON.parse.
 */

/**
 * `capture`: keep the value's JSON text (last occurrence wins, as in
 * JSON.parse). `measure`: add up the UTF-8 length of string values (their
 * decoded text). `presence`: count the values there.
 */
export type WatchKind = 'capture' | 'measure' | 'presence';

/** A path from the document root: object keys, and `*` for any array element. */
export interface WatchSpec {
  readonly path: readonly string[];
  readonly kind: WatchKind;
}

/** A captured value larger than this is dropped: the values metering needs are usage objects and model names. */
export const CAPTURE_LIMIT_BYTES = 16 * 1024;
/** Deeper nesting makes the document invalid; the APIs' responses nest fewer than 20 levels. */
export const MAX_DEPTH = 512;
/** Only keys up to this length can match a watched key; longer keys are scanned, not kept. */
const MAX_KEY_LENGTH = 64;

interface WatchNode {
  readonly children: Map<string, WatchNode>;
  /** The children again, keyed by their keys' UTF-16 units: a key is matched without building a string. */
  readonly keys: { readonly units: readonly number[]; readonly node: WatchNode }[];
  anyElement: WatchNode | undefined;
  watch: { readonly index: number; readonly kind: WatchKind } | undefined;
}

function newNode(): WatchNode {
  return { children: new Map(), keys: [], anyElement: undefined, watch: undefined };
}

function hasChildren(node: WatchNode): boolean {
  return node.children.size > 0 || node.anyElement !== undefined;
}

/** The watched paths compiled into a tree; build it once and share it between scanners. */
export class WatchTree {
  readonly root: WatchNode = newNode();
  readonly kinds: readonly WatchKind[];

  constructor(specs: readonly WatchSpec[]) {
    this.kinds = specs.map((spec) => spec.kind);
    specs.forEach((spec, index) => {
      let node = this.root;
      for (const segment of spec.path) {
        if (node.watch?.kind === 'capture') throw new Error(`watch ${spec.path.join('.')} is inside a captured value`);
        let next = segment === '*' ? node.anyElement : node.children.get(segment);
        if (!next) {
          next = newNode();
          if (segment === '*') node.anyElement = next;
          else {
            node.children.set(segment, next);
            node.keys.push({ units: Array.from(segment, (char) => char.charCodeAt(0)), node: next });
          }
        }
        node = next;
      }
      if (node.watch) throw new Error(`watch ${spec.path.join('.')} is given twice`);
      if (spec.kind === 'capture' && hasChildren(node)) throw new Error(`watch ${spec.path.join('.')} captures a watched value`);
      node.watch = { index, kind: spec.kind };
    });
  }
}

/** What one complete, valid document held at the watched paths. Valid only during the onDocument callback. */
export interface ScannedDocument {
  /** The parsed value at a capture watch, or undefined when absent or larger than CAPTURE_LIMIT_BYTES. */
  value(index: number): unknown;
  /** The decoded UTF-8 bytes of all strings at a measure watch. */
  measured(index: number): number;
  /** How many values were at a presence watch. */
  count(index: number): number;
}

// Scanner modes: what the next significant byte may be.
const M_VALUE = 0; // a value (root, after ':' or after ',' in an array)
const M_VALUE_OR_CLOSE = 1; // a value or ']' (just after '[')
const M_KEY_OR_CLOSE = 2; // '"' or '}' (just after '{')
const M_KEY = 3; // '"' (after ',' in an object)
const M_COLON = 4;
const M_AFTER_VALUE = 5; // ',' or the container's close
const M_STRING = 6;
const M_NUMBER = 7;
const M_LITERAL = 8;
const M_DONE = 9; // the root value is complete: only whitespace may follow
const M_INVALID = 10;

// Inside a string: 0 = plain, 1 = after '\', 2..5 = reading the 4 hex digits of \uXXXX.
const E_NONE = 0;
const E_BACKSLASH = 1;
const E_HEX_FIRST = 2;
const E_HEX_LAST = 5;

// Number states (RFC 8259 grammar).
const N_MINUS = 0;
const N_ZERO = 1;
const N_INT = 2;
const N_DOT = 3;
const N_FRAC = 4;
const N_EXP = 5;
const N_EXP_SIGN = 6;
const N_EXP_DIGITS = 7;
const NUMBER_CAN_END = [false, true, true, false, true, false, false, true];

const LITERALS = [
  [0x74, 0x72, 0x75, 0x65], // true
  [0x66, 0x61, 0x6c, 0x73, 0x65], // false
  [0x6e, 0x75, 0x6c, 0x6c], // null
] as const;

const KIND_OBJECT = 0;
const KIND_ARRAY = 1;

const utf8 = new TextDecoder('utf-8');

function isWhitespace(byte: number): boolean {
  return byte === 0x20 || byte === 0x0a || byte === 0x0d || byte === 0x09;
}

function isDigit(byte: number): boolean {
  return byte >= 0x30 && byte <= 0x39;
}

function hexValue(byte: number): number {
  if (byte >= 0x30 && byte <= 0x39) return byte - 0x30;
  if (byte >= 0x61 && byte <= 0x66) return byte - 0x61 + 10;
  if (byte >= 0x41 && byte <= 0x46) return byte - 0x41 + 10;
  return -1;
}

/** UTF-8 length of one UTF-16 code unit written as \uXXXX (each half of a surrogate pair counts 2, the pair 4). */
function utf8LengthOfCodeUnit(unit: number): number {
  if (unit < 0x80) return 1;
  if (unit < 0x800) return 2;
  if (unit >= 0xd800 && unit <= 0xdfff) return 2;
  return 3;
}

const SIMPLE_ESCAPES: Readonly<Record<number, number>> = {
  0x22: 0x22, // \"
  0x5c: 0x5c, // \\
  0x2f: 0x2f, // \/
  0x62: 0x08, // \b
  0x66: 0x0c, // \f
  0x6e: 0x0a, // \n
  0x72: 0x0d, // \r
  0x74: 0x09, // \t
};

export interface JsonScannerOptions {
  /**
   * When the root is an array, treat each element as a document of its own
   * and report it as soon as it is complete (Gemini's JSON-array stream).
   * Otherwise the root value is the one document, reported by end().
   */
  readonly arrayOfDocuments: boolean;
  readonly onDocument: (document: ScannedDocument) => void;
}

export class JsonScanner implements ScannedDocument {
  private readonly tree: WatchTree;
  private readonly options: JsonScannerOptions;

  private mode = M_VALUE;
  private depth = 0;
  private readonly kinds = new Uint8Array(MAX_DEPTH + 1);
  /** Watch node of each open container whose inside is watched; null where nothing below is. */
  private readonly containerNodes: (WatchNode | null)[] = [];
  /** Watch node of the value that starts next (set by a key, or by an array). */
  private nextValueNode: WatchNode | null = null;
  /** 1 when the root array's elements are the documents. */
  private documentDepth = 0;

  // String state.
  private stringIsKey = false;
  private escape = E_NONE;
  private hexUnit = 0;
  private measureIndex = -1;
  private readonly keyUnits = new Uint16Array(MAX_KEY_LENGTH);
  private keyLength = 0;
  /** -1: the key is not kept (nothing watched here, too long, or not ASCII). */
  private keyState = -1;

  // Number and literal state.
  private numberState = N_MINUS;
  private literal: readonly number[] = LITERALS[0];
  private literalIndex = 0;

  // Capture state: one capture at a time, since no watch lies inside a captured value.
  private captureIndex = -1;
  private captureDepth = 0;
  private captureFrom = 0;
  private captureLength = 0;
  private captureOverflow = false;
  private captureBuffer: Uint8Array | undefined;

  // Per-document results, and whether any was set since the last reset.
  private documentTouched = false;
  private readonly captured: (Uint8Array | null | undefined)[];
  private readonly measures: number[];
  private readonly counts: number[];

  constructor(tree: WatchTree, options: JsonScannerOptions) {
    this.tree = tree;
    this.options = options;
    this.captured = tree.kinds.map(() => undefined);
    this.measures = tree.kinds.map(() => 0);
    this.counts = tree.kinds.map(() => 0);
  }

  /** Ready for a new JSON text (the next server-sent event's data). */
  reset(): void {
    this.mode = M_VALUE;
    this.depth = 0;
    this.containerNodes.length = 0;
    this.nextValueNode = null;
    this.documentDepth = 0;
    this.escape = E_NONE;
    this.captureIndex = -1;
    this.resetDocument();
  }

  /** True when the root is an array whose elements are reported as documents. */
  get isArrayOfDocuments(): boolean {
    return this.documentDepth === 1;
  }

  /**
   * The text ended. With a single-document root, reports the document if the
   * text was one complete, valid JSON value; returns whether it was.
   */
  end(): boolean {
    if (this.mode === M_NUMBER && this.depth === 0 && NUMBER_CAN_END[this.numberState] === true) this.mode = M_DONE;
    const complete = this.mode === M_DONE;
    if (complete && this.documentDepth === 0) this.options.onDocument(this);
    return complete;
  }

  value(index: number): unknown {
    const bytes = this.captured[index];
    if (!bytes) return undefined;
    // Most captured values in a stream are `null` (OpenAI's `"usage":null` on every chunk): no decoding for those.
    if (bytes.length === 4 && bytes[0] === 0x6e && bytes[1] === 0x75 && bytes[2] === 0x6c && bytes[3] === 0x6c) return null;
    try {
      return JSON.parse(utf8.decode(bytes)) as unknown;
    } catch {
      return undefined;
    }
  }

  measured(index: number): number {
    return this.measures[index] ?? 0;
  }

  count(index: number): number {
    return this.counts[index] ?? 0;
  }

  write(bytes: Uint8Array, start = 0, end = bytes.length): void {
    let i = start;
    this.captureFrom = start;
    while (i < end) {
      switch (this.mode) {
        case M_STRING:
          i = this.scanString(bytes, i, end);
          break;
        case M_NUMBER:
          i = this.scanNumber(bytes, i, end);
          break;
        case M_LITERAL: {
          const byte = bytes[i]!;
          if (byte !== this.literal[this.literalIndex]) {
            this.mode = M_INVALID;
            break;
          }
          this.literalIndex++;
          i++;
          if (this.literalIndex === this.literal.length) this.valueEnded(bytes, i);
          break;
        }
        case M_INVALID:
          return;
        default: {
          const byte = bytes[i]!;
          if (isWhitespace(byte)) {
            i++;
            break;
          }
          this.structural(bytes, byte, i);
          i++;
          break;
        }
      }
    }
    if (this.captureIndex >= 0) this.appendCapture(bytes, this.captureFrom, end);
  }

  private structural(bytes: Uint8Array, byte: number, i: number): void {
    switch (this.mode) {
      case M_VALUE:
        this.startValue(bytes, byte, i);
        return;
      case M_VALUE_OR_CLOSE:
        if (byte === 0x5d) this.closeContainer(bytes, KIND_ARRAY, i);
        else this.startValue(bytes, byte, i);
        return;
      case M_KEY_OR_CLOSE:
        if (byte === 0x7d) this.closeContainer(bytes, KIND_OBJECT, i);
        else if (byte === 0x22) this.startKey();
        else this.mode = M_INVALID;
        return;
      case M_KEY:
        if (byte === 0x22) this.startKey();
        else this.mode = M_INVALID;
        return;
      case M_COLON:
        this.mode = byte === 0x3a ? M_VALUE : M_INVALID;
        return;
      case M_AFTER_VALUE: {
        const kind = this.kinds[this.depth];
        if (byte === 0x2c) {
          if (kind === KIND_OBJECT) this.mode = M_KEY;
          else {
            this.mode = M_VALUE;
            this.nextValueNode = this.elementNode();
          }
        } else if (byte === 0x7d && kind === KIND_OBJECT) this.closeContainer(bytes, KIND_OBJECT, i);
        else if (byte === 0x5d && kind === KIND_ARRAY) this.closeContainer(bytes, KIND_ARRAY, i);
        else this.mode = M_INVALID;
        return;
      }
      default: // M_DONE: only whitespace may follow the root value
        this.mode = M_INVALID;
    }
  }

  /** The watch node an element of the current array gets. */
  private elementNode(): WatchNode | null {
    if (this.depth === this.documentDepth) return this.tree.root;
    return this.containerNodes[this.depth]?.anyElement ?? null;
  }

  private startValue(bytes: Uint8Array, byte: number, i: number): void {
    if (this.depth === 0) {
      if (byte === 0x5b && this.options.arrayOfDocuments) {
        this.documentDepth = 1;
        this.nextValueNode = null;
      } else {
        this.resetDocument();
        this.nextValueNode = this.tree.root;
      }
    } else if (this.depth === this.documentDepth) {
      this.resetDocument();
    }
    const node = this.nextValueNode;
    this.nextValueNode = null;
    const watch = node?.watch;
    if (watch) {
      if (watch.kind === 'capture') this.startCapture(watch.index, i);
      else if (watch.kind === 'presence') this.counts[watch.index] = (this.counts[watch.index] ?? 0) + 1;
      this.documentTouched = true;
    }
    if (byte === 0x7b || byte === 0x5b) {
      if (this.depth >= MAX_DEPTH) {
        this.mode = M_INVALID;
        return;
      }
      this.depth++;
      this.kinds[this.depth] = byte === 0x7b ? KIND_OBJECT : KIND_ARRAY;
      this.containerNodes[this.depth] = node && hasChildren(node) ? node : null;
      if (byte === 0x7b) this.mode = M_KEY_OR_CLOSE;
      else {
        this.mode = M_VALUE_OR_CLOSE;
        this.nextValueNode = this.elementNode();
      }
      return;
    }
    if (byte === 0x22) {
      this.mode = M_STRING;
      this.stringIsKey = false;
      this.escape = E_NONE;
      this.measureIndex = watch?.kind === 'measure' ? watch.index : -1;
      return;
    }
    if (byte === 0x2d || isDigit(byte)) {
      this.mode = M_NUMBER;
      this.numberState = byte === 0x2d ? N_MINUS : byte === 0x30 ? N_ZERO : N_INT;
      return;
    }
    const literal = byte === 0x74 ? LITERALS[0] : byte === 0x66 ? LITERALS[1] : byte === 0x6e ? LITERALS[2] : undefined;
    if (!literal) {
      this.mode = M_INVALID;
      return;
    }
    this.mode = M_LITERAL;
    this.literal = literal;
    this.literalIndex = 1;
  }

  private startKey(): void {
    this.mode = M_STRING;
    this.stringIsKey = true;
    this.escape = E_NONE;
    this.measureIndex = -1;
    this.keyLength = 0;
    this.keyState = this.containerNodes[this.depth] ? 0 : -1;
  }

  private closeContainer(bytes: Uint8Array, kind: number, i: number): void {
    if (this.kinds[this.depth] !== kind) {
      this.mode = M_INVALID;
      return;
    }
    this.containerNodes[this.depth] = null;
    this.depth--;
    this.valueEnded(bytes, i + 1);
  }

  /** A value that started at the current depth ended just before `end` in `bytes`. */
  private valueEnded(bytes: Uint8Array, end: number): void {
    const depth = this.depth;
    if (this.captureIndex >= 0 && this.captureDepth === depth) this.finishCapture(bytes, end);
    if (depth === 0) {
      this.mode = M_DONE;
      return;
    }
    this.mode = M_AFTER_VALUE;
    if (depth === this.documentDepth) this.options.onDocument(this);
  }

  private scanString(bytes: Uint8Array, start: number, end: number): number {
    let i = start;
    while (i < end) {
      const byte = bytes[i]!;
      if (this.escape === E_NONE) {
        if (byte === 0x22) {
          if (this.stringIsKey) this.keyEnded();
          else this.valueEnded(bytes, i + 1);
          return i + 1;
        }
        if (byte === 0x5c) {
          this.escape = E_BACKSLASH;
          i++;
          continue;
        }
        if (byte < 0x20) {
          this.mode = M_INVALID;
          return i;
        }
        if (this.keyState >= 0 && this.stringIsKey) this.keyUnit(byte < 0x80 ? byte : -1);
        else if (this.measureIndex >= 0) {
          // Plain bytes up to the next quote, backslash or control byte, in one step.
          let j = i + 1;
          while (j < end) {
            const next = bytes[j]!;
            if (next === 0x22 || next === 0x5c || next < 0x20) break;
            j++;
          }
          this.measures[this.measureIndex] = (this.measures[this.measureIndex] ?? 0) + (j - i);
          i = j;
          continue;
        } else {
          let j = i + 1;
          while (j < end) {
            const next = bytes[j]!;
            if (next === 0x22 || next === 0x5c || next < 0x20) break;
            j++;
          }
          i = j;
          continue;
        }
        i++;
        continue;
      }
      if (this.escape === E_BACKSLASH) {
        if (byte === 0x75) {
          this.escape = E_HEX_FIRST;
          this.hexUnit = 0;
        } else {
          const decoded = SIMPLE_ESCAPES[byte];
          if (decoded === undefined) {
            this.mode = M_INVALID;
            return i;
          }
          this.escape = E_NONE;
          this.decodedUnit(decoded);
        }
        i++;
        continue;
      }
      const digit = hexValue(byte);
      if (digit < 0) {
        this.mode = M_INVALID;
        return i;
      }
      this.hexUnit = this.hexUnit * 16 + digit;
      if (this.escape === E_HEX_LAST) {
        this.escape = E_NONE;
        this.decodedUnit(this.hexUnit);
      } else {
        this.escape++;
      }
      i++;
    }
    return i;
  }

  private decodedUnit(unit: number): void {
    if (this.stringIsKey) {
      if (this.keyState >= 0) this.keyUnit(unit);
    } else if (this.measureIndex >= 0) {
      this.measures[this.measureIndex] = (this.measures[this.measureIndex] ?? 0) + utf8LengthOfCodeUnit(unit);
    }
  }

  /** A key character (a UTF-16 unit), or -1 for a byte of a non-ASCII character: such a key never matches. */
  private keyUnit(unit: number): void {
    if (unit < 0 || this.keyLength >= MAX_KEY_LENGTH) {
      this.keyState = -1;
      return;
    }
    this.keyUnits[this.keyLength++] = unit;
  }

  private keyEnded(): void {
    this.mode = M_COLON;
    const container = this.containerNodes[this.depth];
    if (!container || this.keyState < 0) {
      this.nextValueNode = null;
      return;
    }
    this.nextValueNode = null;
    for (const candidate of container.keys) {
      if (candidate.units.length !== this.keyLength) continue;
      let same = true;
      for (let k = 0; k < this.keyLength && same; k++) same = candidate.units[k] === this.keyUnits[k];
      if (same) {
        this.nextValueNode = candidate.node;
        return;
      }
    }
  }

  private scanNumber(bytes: Uint8Array, start: number, end: number): number {
    let i = start;
    while (i < end) {
      const byte = bytes[i]!;
      const state = this.numberState;
      let next = -1;
      if (isDigit(byte)) {
        if (state === N_MINUS) next = byte === 0x30 ? N_ZERO : N_INT;
        else if (state === N_INT) next = N_INT;
        else if (state === N_DOT || state === N_FRAC) next = N_FRAC;
        else if (state === N_EXP || state === N_EXP_SIGN || state === N_EXP_DIGITS) next = N_EXP_DIGITS;
      } else if (byte === 0x2e) {
        if (state === N_ZERO || state === N_INT) next = N_DOT;
      } else if (byte === 0x65 || byte === 0x45) {
        if (state === N_ZERO || state === N_INT || state === N_FRAC) next = N_EXP;
      } else if (byte === 0x2b || byte === 0x2d) {
        if (state === N_EXP) next = N_EXP_SIGN;
      }
      if (next >= 0) {
        this.numberState = next;
        i++;
        continue;
      }
      // Any other byte ends the number; it is then read as structure.
      if (!NUMBER_CAN_END[state]) {
        this.mode = M_INVALID;
        return i;
      }
      this.valueEnded(bytes, i);
      return i;
    }
    return i;
  }

  private resetDocument(): void {
    if (!this.documentTouched) return;
    this.captured.fill(undefined);
    this.measures.fill(0);
    this.counts.fill(0);
    this.documentTouched = false;
  }

  private startCapture(index: number, i: number): void {
    this.captureIndex = index;
    this.captureDepth = this.depth;
    this.captureFrom = i;
    this.captureLength = 0;
    this.captureOverflow = false;
  }

  private appendCapture(bytes: Uint8Array, from: number, to: number): void {
    if (this.captureOverflow || to <= from) return;
    if (this.captureLength + (to - from) > CAPTURE_LIMIT_BYTES) {
      this.captureOverflow = true;
      return;
    }
    const buffer = (this.captureBuffer ??= new Uint8Array(CAPTURE_LIMIT_BYTES));
    // Captured values are short: a loop beats allocating a subarray view for them.
    if (to - from <= 64) for (let k = from; k < to; k++) buffer[this.captureLength++] = bytes[k]!;
    else {
      buffer.set(bytes.subarray(from, to), this.captureLength);
      this.captureLength += to - from;
    }
  }

  private finishCapture(bytes: Uint8Array, end: number): void {
    this.appendCapture(bytes, this.captureFrom, end);
    this.captured[this.captureIndex] = this.captureOverflow ? null : (this.captureBuffer?.slice(0, this.captureLength) ?? null);
    this.captureIndex = -1;
  }
}
