/**
 * Listings order ids by UTF-16 code units (what Array.prototype.sort does
 * without a comparator), never by locale: the same on every host and in
 * every store.
 */
export function compareCodeUnits(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
