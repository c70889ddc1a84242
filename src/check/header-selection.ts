/**
 * Which of a CheckRequest's headers the decoder turns into strings. Envoy
 * sends every request header (an official SDK's request carries 15–25), the
 * pipeline reads a handful, and decoding the rest was the largest part of
 * reading a Check: a string for each name and value, and a map entry for
 * each (cpu-profile.ts: about a sixth of the in-process hot path).
 *
 * A name is compared on its bytes, before any string is made. It matches as
 * toAuthRequest would fold it: ASCII capitals compare as lower case, and a
 * name with any non-ASCII byte is decoded and lower-cased as a string
 * (`toLowerCase()` maps some non-ASCII letters, the Kelvin sign among them, to
 * ASCII ones). A match keeps the name as sent, so what toAuthRequest builds
 * from the kept headers is exactly what it builds from all of them, minus
 * headers nobody reads.
 */
export class HeaderSelection {
  /** By byte length: the wanted names of that length, as strings and bytes. */
  private readonly byLength: ({ name: string; bytes: Buffer }[] | undefined)[] = [];
  private readonly names: ReadonlySet<string>;

  constructor(names: Iterable<string>) {
    this.names = new Set(names);
    for (const name of this.names) {
      if (!/^[!#$%&'*+.^_`|~0-9a-z:-]+$/.test(name)) throw new Error(`header selection: "${name}" is not a lower-case header name`);
      (this.byLength[name.length] ??= []).push({ name, bytes: Buffer.from(name, 'latin1') });
    }
  }

  /**
   * The name to keep the header under when `buffer[start, end)` names a
   * wanted header: the wanted name itself (no string made) when the bytes are
   * exactly it, otherwise the name as sent; undefined for any other header.
   */
  keyFor(buffer: Buffer, start: number, end: number): string | undefined {
    const candidates = this.byLength[end - start];
    if (candidates) {
      for (const { name, bytes } of candidates) {
        const match = compareFolded(buffer, start, bytes);
        if (match === EXACT) return name;
        if (match === FOLDED) return buffer.toString('utf8', start, end);
      }
    }
    for (let i = start; i < end; i += 1) {
      if (buffer[i]! >= 0x80) {
        const sent = buffer.toString('utf8', start, end);
        return this.names.has(sent.toLowerCase()) ? sent : undefined;
      }
    }
    return undefined;
  }
}

const DIFFERENT = 0;
const EXACT = 1;
const FOLDED = 2;

/** `wanted` is lower case; `buffer` from `start` has at least its length. */
function compareFolded(buffer: Buffer, start: number, wanted: Buffer): number {
  let folded = false;
  for (let i = 0; i < wanted.length; i += 1) {
    const byte = buffer[start + i]!;
    const want = wanted[i]!;
    if (byte === want) continue;
    if (byte >= 0x41 && byte <= 0x5a && byte + 0x20 === want) folded = true;
    else return DIFFERENT;
  }
  return folded ? FOLDED : EXACT;
}
