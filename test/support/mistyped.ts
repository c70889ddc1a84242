/**
 * A credential (customer key, operator token) with its last character changed, as a typo would: the last character
 * is part of the checksum, so the result is malformed whatever that character was. Replacing it by a fixed one would
 * leave a credential that already ended in it valid.
 */
export function mistyped(credential: string): string {
  return `${credential.slice(0, -1)}${credential.endsWith('x') ? 'y' : 'x'}`;
}
