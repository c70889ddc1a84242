import { auditQuery } from '../../../src/admin/admin-schemas';

describe('the audit cursor (before)', () => {
  it.each(['0-0', '1763812800000-0', '18446744073709551615-18446744073709551615'])('takes the stream id %s', (before) => {
    expect(auditQuery.safeParse({ before }).success).toBe(true);
  });

  it.each(['18446744073709551616-0', '1-18446744073709551616', '123456789012345678901-0', 'abc', '1-', '-1', '1-2-3'])(
    'refuses %s, saying it must be an entry id',
    (before) => {
      const parsed = auditQuery.safeParse({ before });
      expect(parsed.success).toBe(false);
      expect(parsed.error?.issues[0]?.message).toContain('must be an entry id from a previous page');
    },
  );
});
