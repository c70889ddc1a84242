import { JsonScanner, type ScannedDocument, type WatchTree } from './json-scanner';

/**
 * Server-sent events (WHATWG HTML §9.2.6) read byte by byte, each event's
 * data handed straight to a JsonScanner: nothing is buffered but the field
 * name and the event name (both short), so an event of any size costs no
 * memory. Lines end in CRLF, LF or CR (Gemini sends CRLF), wherever Envoy
 * cut the chunks; data lines of one event are joined with "\n"; comment lines
 * (`:`), `id` and `retry` are ignored; a leading byte-order mark is skipped.
 *
 * One deliberate difference from a browser's EventSource: at the end of the
 * body, an event whose data is a complete JSON text but which lacks the
 * final blank line is still read, because its bytes were delivered.
 */
export interface SseHandlers {
  /** An event whose data was one complete, valid JSON text. `document` is valid during the call only. */
  onJsonEvent(eventName: string, document: ScannedDocument): void;
  /** `data: [DONE]`: the end-of-stream marker of OpenAI's chat completions. */
  onDone(): void;
}

const L_FIELD = 0;
const L_VALUE_START = 1;
const L_VALUE = 2;
const L_IGNORE = 3;

const F_OTHER = 0;
const F_DATA = 1;
const F_EVENT = 2;

const MAX_FIELD_NAME = 8;
const MAX_EVENT_NAME = 64;
const DONE = [0x5b, 0x44, 0x4f, 0x4e, 0x45, 0x5d]; // [DONE]
const BOM = [0xef, 0xbb, 0xbf];
const NEWLINE = new Uint8Array([0x0a]);

export class SseJsonReader {
  private readonly scanner: JsonScanner;
  private readonly handlers: SseHandlers;

  private lineState = L_FIELD;
  private afterCR = false;
  /** Position of the next CR in the current chunk: -2 not searched yet, -1 none. */
  private nextCr = -2;
  private bomChecked = 0; // bytes of a leading BOM matched so far; -1 once past it
  private readonly fieldName = new Uint8Array(MAX_FIELD_NAME);
  private fieldLength = 0;
  private field = F_OTHER;

  private dataLines = 0;
  private dataLength = 0;
  private doneMatch = true;
  private readonly eventName = new Uint8Array(MAX_EVENT_NAME);
  private eventNameLength = 0;
  private currentEventName = '';
  private readonly lastEventName = new Uint8Array(MAX_EVENT_NAME);
  private lastEventNameLength = 0;
  private lastEventNameText = '';

  /** Events whose data was not a complete JSON text (nor [DONE]). */
  invalidEvents = 0;
  /** Events read as JSON, plus [DONE]. */
  validEvents = 0;

  constructor(tree: WatchTree, handlers: SseHandlers) {
    this.handlers = handlers;
    this.scanner = new JsonScanner(tree, {
      arrayOfDocuments: false,
      onDocument: (document) => this.handlers.onJsonEvent(this.currentEventName, document),
    });
  }

  write(bytes: Uint8Array): void {
    this.nextCr = -2;
    let i = 0;
    const end = bytes.length;
    while (this.bomChecked >= 0 && i < end) {
      if (bytes[i] === BOM[this.bomChecked]) {
        i++;
        if (++this.bomChecked === BOM.length) this.bomChecked = -1;
      } else if (this.bomChecked === 0) {
        this.bomChecked = -1;
      } else {
        // A partial BOM followed by something else: those bytes were the start of a line.
        const partial = this.bomChecked;
        this.bomChecked = -1;
        this.write(Uint8Array.from(BOM.slice(0, partial)));
      }
    }
    while (i < end) {
      const byte = bytes[i]!;
      if (byte === 0x0d || byte === 0x0a) {
        const isLfAfterCr = byte === 0x0a && this.afterCR;
        this.afterCR = byte === 0x0d;
        i++;
        if (!isLfAfterCr) this.lineEnded();
        continue;
      }
      this.afterCR = false;
      switch (this.lineState) {
        case L_FIELD:
          if (byte === 0x3a) {
            if (this.fieldLength === 0)
              this.lineState = L_IGNORE; // a comment line
            else this.fieldEnded(L_VALUE_START);
          } else if (this.fieldLength < MAX_FIELD_NAME) {
            this.fieldName[this.fieldLength++] = byte;
          } else {
            this.fieldLength = MAX_FIELD_NAME + 1; // too long to be a field we read
          }
          i++;
          break;
        case L_VALUE_START:
          this.lineState = L_VALUE;
          if (byte === 0x20) i++; // one space after the colon is not part of the value
          break;
        case L_VALUE: {
          const lineEnd = this.lineEnd(bytes, i);
          this.value(bytes, i, lineEnd);
          i = lineEnd;
          break;
        }
        default: // L_IGNORE
          i = this.lineEnd(bytes, i);
      }
    }
  }

  /**
   * Where the line that continues at `from` ends in this chunk (or the
   * chunk's end): native searches for LF, and for CR, which most streams never
   * send, remembered per chunk so a chunk without one is searched once.
   */
  private lineEnd(bytes: Uint8Array, from: number): number {
    if (this.nextCr !== -1 && this.nextCr < from) this.nextCr = bytes.indexOf(0x0d, from);
    const lf = bytes.indexOf(0x0a, from);
    const end = lf === -1 ? bytes.length : lf;
    return this.nextCr === -1 ? end : Math.min(end, this.nextCr);
  }

  /** The body ended: reads a last event that lacks its blank line if its data is complete JSON. */
  end(): void {
    if (this.lineState === L_FIELD && this.fieldLength > 0) this.fieldEnded(L_VALUE);
    this.dispatch();
  }

  private fieldEnded(next: number): void {
    this.field = this.fieldLength > MAX_FIELD_NAME ? F_OTHER : fieldOf(this.fieldName, this.fieldLength);
    this.lineState = next;
    if (this.field === F_DATA) {
      if (this.dataLines > 0) this.data(NEWLINE, 0, 1);
      this.dataLines++;
    } else if (this.field === F_EVENT) {
      this.eventNameLength = 0;
    }
  }

  private lineEnded(): void {
    if (this.lineState === L_FIELD) {
      if (this.fieldLength === 0) this.dispatch();
      else this.fieldEnded(L_VALUE); // a field with no colon has an empty value
    }
    this.lineState = L_FIELD;
    this.fieldLength = 0;
    this.field = F_OTHER;
  }

  private value(bytes: Uint8Array, from: number, to: number): void {
    if (this.field === F_DATA) this.data(bytes, from, to);
    else if (this.field === F_EVENT) {
      for (let k = from; k < to; k++) {
        if (this.eventNameLength < MAX_EVENT_NAME) this.eventName[this.eventNameLength++] = bytes[k]!;
        else this.eventNameLength = MAX_EVENT_NAME + 1;
      }
    }
  }

  private data(bytes: Uint8Array, from: number, to: number): void {
    for (let k = from; k < to && this.doneMatch; k++) {
      const at = this.dataLength + (k - from);
      if (at >= DONE.length || bytes[k] !== DONE[at]) this.doneMatch = false;
    }
    this.dataLength += to - from;
    this.scanner.write(bytes, from, to);
  }

  /** The event name as text, reusing the previous event's string when the name repeats (it mostly does). */
  private decodedEventName(): string {
    const length = this.eventNameLength;
    if (length !== this.lastEventNameLength || !sameBytes(this.eventName, this.lastEventName, length)) {
      this.lastEventName.set(this.eventName.subarray(0, length));
      this.lastEventNameLength = length;
      this.lastEventNameText = latin1(this.eventName, length);
    }
    return this.lastEventNameText;
  }

  private dispatch(): void {
    if (this.dataLines > 0) {
      if (this.doneMatch && this.dataLength === DONE.length) {
        this.validEvents++;
        this.handlers.onDone();
      } else {
        this.currentEventName = this.eventNameLength <= MAX_EVENT_NAME ? this.decodedEventName() : '';
        if (this.scanner.end()) this.validEvents++;
        else this.invalidEvents++;
      }
    }
    this.scanner.reset();
    this.dataLines = 0;
    this.dataLength = 0;
    this.doneMatch = true;
    this.eventNameLength = 0;
    this.currentEventName = '';
  }
}

function sameBytes(a: Uint8Array, b: Uint8Array, length: number): boolean {
  for (let k = 0; k < length; k++) if (a[k] !== b[k]) return false;
  return true;
}

function fieldOf(name: Uint8Array, length: number): number {
  // "data" and "event" in ASCII.
  if (length === 4 && name[0] === 0x64 && name[1] === 0x61 && name[2] === 0x74 && name[3] === 0x61) return F_DATA;
  if (length === 5 && name[0] === 0x65 && name[1] === 0x76 && name[2] === 0x65 && name[3] === 0x6e && name[4] === 0x74) return F_EVENT;
  return F_OTHER;
}

function latin1(bytes: Uint8Array, length: number): string {
  return String.fromCharCode(...bytes.subarray(0, length));
}
