import { adminTokenMatches } from '../../../src/admin/admin-token';

const TOKEN = `adm_${'x'.repeat(12)}${'7'.repeat(16)}`;

describe('adminTokenMatches', () => {
  it('accepts Bearer with the configured token', () => {
    expect(adminTokenMatches(`Bearer ${TOKEN}`, TOKEN)).toBe(true);
  });

  it.each(['bearer', 'BEARER', 'BeArEr'])('accepts the scheme spelled %s', (scheme) => {
    expect(adminTokenMatches(`${scheme} ${TOKEN}`, TOKEN)).toBe(true);
  });

  it('tolerates several spaces after the scheme and trailing whitespace', () => {
    expect(adminTokenMatches(`Bearer   ${TOKEN}`, TOKEN)).toBe(true);
    expect(adminTokenMatches(`Bearer ${TOKEN}  `, TOKEN)).toBe(true);
  });

  it('refuses a different token of the same length', () => {
    const other = TOKEN.slice(0, -1) + (TOKEN.endsWith('8') ? '9' : '8');
    expect(other).toHaveLength(TOKEN.length);
    expect(adminTokenMatches(`Bearer ${other}`, TOKEN)).toBe(false);
  });

  it('refuses a prefix or an extension of the token', () => {
    expect(adminTokenMatches(`Bearer ${TOKEN.slice(0, -1)}`, TOKEN)).toBe(false);
    expect(adminTokenMatches(`Bearer ${TOKEN}x`, TOKEN)).toBe(false);
  });

  it('is case-sensitive in the token', () => {
    expect(adminTokenMatches(`Bearer ${TOKEN.toUpperCase()}`, TOKEN)).toBe(false);
  });

  it.each([
    ['no header', undefined],
    ['an empty header', ''],
    ['the bare token without scheme', TOKEN],
    ['another scheme', `Basic ${TOKEN}`],
    ['Token scheme', `Token ${TOKEN}`],
    ['scheme only', 'Bearer'],
    ['scheme and spaces', 'Bearer   '],
    ['two tokens', `Bearer ${TOKEN} ${TOKEN}`],
    ['leading whitespace before the scheme', ` Bearer ${TOKEN}`],
    ['scheme glued to the token', `Bearer${TOKEN}`],
  ])('refuses %s', (_label, header) => {
    expect(adminTokenMatches(header, TOKEN)).toBe(false);
  });

  it('never matches an empty configured token, even with an empty presented one', () => {
    expect(adminTokenMatches('Bearer ', '')).toBe(false);
    expect(adminTokenMatches('', '')).toBe(false);
    expect(adminTokenMatches(undefined, '')).toBe(false);
  });

  it('compares tokens of very different lengths without throwing', () => {
    expect(() => adminTokenMatches('Bearer a', 'b'.repeat(500))).not.toThrow();
    expect(adminTokenMatches('Bearer a', 'b'.repeat(500))).toBe(false);
    expect(adminTokenMatches(`Bearer ${'b'.repeat(500)}`, 'b'.repeat(500))).toBe(true);
  });
});
