import {
  formatPlacedHold,
  heldInSlots,
  HOLD_HEADER,
  HOLD_LIFETIME_US,
  HOLD_LONGEST_LIFETIME_US,
  HOLD_SLOT_US,
  holdSlotAt,
  holdSlotsAt,
  parsePlacedHold,
  releaseFromSlots,
  type HoldSlots,
} from '../../../src/accounts/credit-holds';
import { CREDIT_LIMIT_MINOR_UNITS } from '../../../src/accounts/credit';
import type { AllowDecision } from '../../../src/check/decision';
import { toCheckAnswer } from '../../../src/check/responses/check-response';
import { usageRecordProblem, type UsageRecord } from '../../../src/metering/usage-record';

/**
 * Credit holds kept as sums per slot (src/accounts/credit-holds.ts): the arithmetic both stores share (the Redis
 * script mirrors it, and test/store/credit-holds.test.ts runs both), the header that carries a placed hold from
 * ext_authz to metering, and the Check answer that sets it or removes it.
 */
const slots = (slot: number, money: number[], tokens: number[]): HoldSlots => ({ slot, money, tokens });

describe('hold slots', () => {
  it('a hold counts for at least the lifetime and at most one slot more', () => {
    expect(HOLD_SLOT_US).toBe(HOLD_LIFETIME_US);
    expect(HOLD_LONGEST_LIFETIME_US).toBe(2 * HOLD_LIFETIME_US);
    // Placed at the last µs of its slot, it lapses one slot later: the lifetime, to the µs.
    const placedAt = HOLD_SLOT_US * 1000 - 1;
    const lapsesAt = (holdSlotAt(placedAt) + 2) * HOLD_SLOT_US;
    expect(lapsesAt - placedAt).toBe(HOLD_LIFETIME_US + 1);
    expect(holdSlotAt(placedAt + 1)).toBe(holdSlotAt(placedAt) + 1);
  });

  it('moves the sums along with time: kept in their slot, the one before next, dropped after', () => {
    const stored = slots(10, [5, 7], [50, 70]);
    expect(holdSlotsAt(stored, 10)).toEqual(slots(10, [5, 7], [50, 70]));
    expect(holdSlotsAt(stored, 11)).toEqual(slots(11, [0, 5], [0, 50]));
    expect(holdSlotsAt(stored, 12)).toEqual(slots(12, [0, 0], [0, 0]));
    expect(holdSlotsAt(stored, 1_000)).toEqual(slots(1_000, [0, 0], [0, 0]));
    // A Check whose clock is behind the stored slot (another replica's ahead) keeps the stored slot.
    expect(holdSlotsAt(stored, 9)).toEqual(slots(10, [5, 7], [50, 70]));
    expect(holdSlotsAt(undefined, 3)).toEqual(slots(3, [0, 0], [0, 0]));
    expect(heldInSlots(stored)).toEqual({ minorUnits: 12, tokens: 120 });
  });

  it('releases a hold from the slot it was placed in, never below zero, and nothing once that slot has passed', () => {
    const held = slots(10, [5, 7], [50, 70]);
    releaseFromSlots(held, { slot: 9, minorUnits: 3, tokens: 30 });
    expect(held).toEqual(slots(10, [5, 4], [50, 40]));
    releaseFromSlots(held, { slot: 10, minorUnits: 9, tokens: 9 });
    expect(held).toEqual(slots(10, [0, 4], [41, 40]));
    releaseFromSlots(held, { slot: 8, minorUnits: 4, tokens: 40 });
    releaseFromSlots(held, { slot: 11, minorUnits: 4, tokens: 40 });
    expect(held).toEqual(slots(10, [0, 4], [41, 40]));
  });
});

describe('the hold header', () => {
  it('carries a placed hold as three whole numbers and reads back the same', () => {
    const hold = { slot: 2_493_105, minorUnits: CREDIT_LIMIT_MINOR_UNITS, tokens: 0 };
    expect(formatPlacedHold(hold)).toBe(`2493105 ${CREDIT_LIMIT_MINOR_UNITS} 0`);
    expect(parsePlacedHold(formatPlacedHold(hold))).toEqual(hold);
  });

  it.each(['', '1 2', '1 2 3 4', '1 -2 3', '1 2.5 3', ' 1 2 3', '1 2 3x', `1 ${CREDIT_LIMIT_MINOR_UNITS + 1} 0`, '1 0 2000000001'])(
    'is no hold for %j',
    (text) => {
      expect(parsePlacedHold(text)).toBeUndefined();
    },
  );

  it('a usage record carries only a hold the header could carry', () => {
    const record: UsageRecord = {
      requestId: 'req-1',
      accountId: 'acme',
      keyId: 'key_ki7sq0QuenAUq8kr',
      keyPrefix: 'gk_live_AbC4',
      family: 'chat-completions',
      style: 'chat',
      tokens: { inputTokens: 1, outputTokens: 1, cachedInputTokens: 0, cacheCreationTokens: 0 },
      costMinorUnits: 0,
      estimated: false,
      atMs: 1,
    };
    expect(usageRecordProblem({ ...record, hold: { slot: 1, minorUnits: 2, tokens: 3 } })).toBeUndefined();
    expect(usageRecordProblem({ ...record, hold: { slot: 1, minorUnits: -2, tokens: 3 } })).toMatch(/^hold /);
    expect(usageRecordProblem({ ...record, hold: { slot: 1.5, minorUnits: 2, tokens: 3 } })).toMatch(/^hold /);
  });
});

describe('the Check answer', () => {
  const decision: AllowDecision = {
    kind: 'allow',
    route: { family: 'chat-completions', style: 'chat', pathWithoutQuery: '/v1/chat/completions' },
    identity: { accountId: 'acme', keyId: 'key_1', keyPrefix: 'gk_live_AbC4', environment: 'live' },
    strip: { headers: ['authorization'], queryParameters: [] },
  };
  const answer = (allow: AllowDecision) => {
    const checked = toCheckAnswer(allow, { requestId: 'req-1', storeFailureMode: 'deny', now: 0, versionHeaders: [] });
    if (checked.kind !== 'response' || !checked.response.ok_response) throw new Error('not an allow');
    const ok = checked.response.ok_response;
    return {
      set: (ok.headers ?? []).filter((h) => h.header.key === HOLD_HEADER).map((h) => [h.header.value, h.append_action]),
      removed: (ok.headers_to_remove ?? []).includes(HOLD_HEADER),
    };
  };

  it('sets the hold it placed on the request, overwriting any the client sent', () => {
    expect(answer({ ...decision, held: { slot: 7, minorUnits: 250, tokens: 4096 } })).toEqual({
      set: [['7 250 4096', 'OVERWRITE_IF_EXISTS_OR_ADD']],
      removed: false,
    });
  });

  it('removes a client-sent hold header from a request that held nothing, identified or public', () => {
    expect(answer(decision)).toEqual({ set: [], removed: true });
    const { identity: _identity, ...publicRoute } = decision;
    expect(answer(publicRoute)).toEqual({ set: [], removed: true });
  });
});
