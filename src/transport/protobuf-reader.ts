/** Protobuf wire-format reading shared by the request decoders (Check, ext_proc's ProcessingRequest, the health service). */
export const WIRE_VARINT = 0;
export const WIRE_FIXED64 = 1;
export const WIRE_BYTES = 2;
export const WIRE_GROUP_START = 3;
export const WIRE_GROUP_END = 4;
export const WIRE_FIXED32 = 5;

/** Reads protobuf wire format as protobufjs's BufferReader does, and throws where it throws. */
export class ProtobufReader {
  constructor(
    readonly buffer: Buffer,
    public pos: number,
    readonly end: number,
  ) {}

  /** A varint as uint32 (tags and lengths), as protobufjs reads them; up to 10 bytes, higher bits dropped. */
  uint32(): number {
    let value = 0;
    for (let shift = 0, i = 0; i < 10; i += 1, shift += 7) {
      if (this.pos >= this.end) throw new RangeError('index out of range: truncated varint');
      const byte = this.buffer[this.pos++]!;
      if (shift < 32) value |= (byte & 0x7f) << shift;
      if (byte < 0x80) return value >>> 0;
    }
    throw new Error('invalid varint encoding');
  }

  /** The bounds of a length-delimited field's payload; the reader moves past it. */
  delimited(): [number, number] {
    const start = this.passPayload();
    return [start, this.pos];
  }

  /**
   * Moves past a length-delimited field's payload and returns where it
   * started (it ends at the new `pos`). string() and nested() use it rather
   * than delimited(): a Check reads about 50 strings, and delimited()'s array
   * was 1.8 KB of garbage per Check (cpu-profile.ts --allocations).
   */
  passPayload(): number {
    const length = this.uint32();
    const start = this.pos;
    if (length > this.end - start) throw new RangeError('index out of range: length past the end');
    this.pos = start + length;
    return start;
  }

  /** A double (wire type fixed64), little-endian. */
  double(): number {
    if (8 > this.end - this.pos) throw new RangeError('index out of range: fixed field past the end');
    const value = this.buffer.readDoubleLE(this.pos);
    this.pos += 8;
    return value;
  }

  string(): string {
    const start = this.passPayload();
    return this.buffer.toString('utf8', start, this.pos);
  }

  skip(wireType: number): void {
    switch (wireType) {
      case WIRE_VARINT:
        this.uint32();
        return;
      case WIRE_FIXED64:
        this.advance(8);
        return;
      case WIRE_BYTES:
        this.delimited();
        return;
      case WIRE_GROUP_START:
        for (;;) {
          const tag = this.uint32();
          const type = tag & 7;
          if (type === WIRE_GROUP_END) return;
          this.skip(type);
        }
      case WIRE_FIXED32:
        this.advance(4);
        return;
      default:
        throw new Error(`invalid wire type ${wireType}`);
    }
  }

  private advance(bytes: number): void {
    if (bytes > this.end - this.pos) throw new RangeError('index out of range: fixed field past the end');
    this.pos += bytes;
  }

  /** A reader over a nested message, moving this one past it. */
  nested(): ProtobufReader {
    const start = this.passPayload();
    return new ProtobufReader(this.buffer, start, this.pos);
  }
}
