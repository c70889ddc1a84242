import { capRefuses, countsTowardCap } from '../../../src/keys/active-key-cap';
import { OPERATOR } from '../../../src/accounts/customer-identity';
import {
  emailProblem,
  issuerProblem,
  leavesNoOwner,
  normalizeEmail,
  principalKey,
  subjectProblem,
  type Member,
  type MemberPrincipal,
} from '../../../src/accounts/members';

const member = (id: string, role: Member['role'], principal: MemberPrincipal): Member => ({
  id,
  accountId: 'acme',
  role,
  principal,
  addedAt: '2026-01-01T00:00:00.000Z',
  addedBy: OPERATOR,
});
const identity = (subject: string): MemberPrincipal => ({ kind: 'identity', issuer: 'https://idp.example', subject });

describe('the last-owner rule', () => {
  const owner = member('mem_1', 'owner', identity('a'));
  const invitedOwner = member('mem_2', 'owner', { kind: 'invitation', email: 'b@example.com' });
  const viewer = member('mem_3', 'viewer', identity('c'));

  it('refuses to remove or demote the only owner who can sign in; a pending owner invitation does not count', () => {
    expect(leavesNoOwner([owner, invitedOwner, viewer], 'mem_1', null)).toBe(true);
    expect(leavesNoOwner([owner, invitedOwner, viewer], 'mem_1', 'developer')).toBe(true);
  });

  it('allows it when another acting owner remains, keeping an owner an owner, and any change to others', () => {
    const second = member('mem_4', 'owner', identity('d'));
    expect(leavesNoOwner([owner, second], 'mem_1', null)).toBe(false);
    expect(leavesNoOwner([owner], 'mem_1', 'owner')).toBe(false);
    expect(leavesNoOwner([owner, invitedOwner, viewer], 'mem_2', null)).toBe(false);
    expect(leavesNoOwner([owner, viewer], 'mem_3', null)).toBe(false);
    expect(leavesNoOwner([viewer], 'mem_3', null)).toBe(false); // no owner to keep
  });
});

describe('principals', () => {
  it('names each principal unambiguously, without a Redis Cluster hash tag or a colon inside a part', () => {
    expect(principalKey({ kind: 'identity', issuer: 'https://idp.example/{x}', subject: 'a:b' })).toBe(
      'identity:https%3A%2F%2Fidp.example%2F%7Bx%7D:a%3Ab',
    );
    expect(principalKey({ kind: 'invitation', email: ' Dev@Example.COM ' })).toBe('email:dev%40example.com');
    expect(principalKey(identity('a:b'))).not.toBe(principalKey({ kind: 'identity', issuer: 'https://idp.example:a', subject: 'b' }));
  });

  it('normalises emails and refuses what cannot be one', () => {
    expect(normalizeEmail('  Ann@Example.COM ')).toBe('ann@example.com');
    expect(emailProblem('ann@example.com')).toBeUndefined();
    for (const bad of [
      '',
      'ann',
      'ann@example',
      'a b@example.com',
      'a@b@example.com',
      `${'a'.repeat(250)}@example.com`,
      'a\n@example.com',
    ]) {
      expect(emailProblem(bad)).toEqual(expect.any(String));
    }
  });

  it('takes https issuers (http only on loopback) without query or fragment, and subjects of 1-255 characters', () => {
    expect(issuerProblem('https://login.example.com')).toBeUndefined();
    expect(issuerProblem('http://localhost:4000')).toBeUndefined();
    for (const bad of ['', 'login.example.com', 'http://login.example.com', 'https://idp.example/?a=1', 'https://idp.example/#x']) {
      expect(issuerProblem(bad)).toEqual(expect.any(String));
    }
    expect(subjectProblem('248289761001')).toBeUndefined();
    for (const bad of ['', 'x'.repeat(256), 'a\u0000b']) expect(subjectProblem(bad)).toEqual(expect.any(String));
  });
});

describe('the active-key cap', () => {
  const key = { status: 'active' as const };
  it('counts a key until it is revoked or its grace period has ended (an expired key still counts)', () => {
    expect(countsTowardCap(key, 0)).toBe(true);
    expect(countsTowardCap({ status: 'revoked' }, 0)).toBe(false);
    expect(countsTowardCap({ ...key, revokeAt: '1970-01-01T00:00:01.000Z' }, 999)).toBe(true);
    expect(countsTowardCap({ ...key, revokeAt: '1970-01-01T00:00:01.000Z' }, 1000)).toBe(false);
  });

  it('refuses creation at the cap, a grace rotation only above it', () => {
    expect([capRefuses('create', 49, 50), capRefuses('create', 50, 50)]).toEqual([false, true]);
    expect([capRefuses('rotate_with_grace', 50, 50), capRefuses('rotate_with_grace', 51, 50)]).toEqual([false, true]);
    expect(capRefuses('create', 0, 0)).toBe(true);
  });
});
