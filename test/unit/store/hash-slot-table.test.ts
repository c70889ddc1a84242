import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { HASH_WORDS, HashSlotTable } from '../../../src/check/hash-slot-table';

const wordsOf = (name: string): Uint32Array => {
  const digest = createHash('sha256').update(name).digest();
  const words = new Uint32Array(HASH_WORDS);
  Buffer.from(words.buffer).set(digest);
  return words;
};

/**
 * The same table, written the obvious way: a list of slots searched from
 * the start, and the CLOCK hand over it. The real one must pick the same
 * entry numbers for every operation.
 */
class ClockModel {
  private readonly slots: string[] = [];
  private readonly used: boolean[] = [];
  private hand = 0;

  constructor(private readonly capacity: number) {}

  find(name: string): number {
    return this.slots.indexOf(name);
  }

  touch(entry: number): void {
    this.used[entry] = true;
  }

  claim(name: string, isStale: (entry: number) => boolean): number {
    const found = this.find(name);
    if (found >= 0) return found;
    let entry = this.slots.length;
    if (entry === this.capacity) {
      for (;;) {
        entry = this.hand;
        this.hand = (this.hand + 1) % this.capacity;
        if (isStale(entry) || !this.used[entry]) break;
        this.used[entry] = false;
      }
    }
    this.slots[entry] = name;
    this.used[entry] = false;
    return entry;
  }
}

describe('HashSlotTable', () => {
  it('finds each hash it was given, and no other', () => {
    const table = new HashSlotTable(3);
    const a = table.claim(wordsOf('a'));
    const b = table.claim(wordsOf('b'));
    expect([a, b]).toEqual([0, 1]);
    expect(table.find(wordsOf('a'))).toBe(a);
    expect(table.find(wordsOf('b'))).toBe(b);
    expect(table.find(wordsOf('c'))).toBe(-1);
    expect(table.claim(wordsOf('a'))).toBe(a);
    expect(table.size).toBe(2);
  });

  it('tells apart hashes that differ only in their last byte', () => {
    const first = wordsOf('x');
    const second = Uint32Array.from(first);
    second[HASH_WORDS - 1] = second[HASH_WORDS - 1]! ^ 0x01000000;
    const table = new HashSlotTable(2);
    const entry = table.claim(first);
    expect(table.find(second)).toBe(-1);
    expect(table.claim(second)).not.toBe(entry);
    expect(table.find(first)).toBe(entry);
  });

  it('when full, gives the slot of an entry not used since the hand last passed, and keeps the used one', () => {
    const table = new HashSlotTable(2);
    const a = table.claim(wordsOf('a'));
    table.claim(wordsOf('b'));
    table.touch(a);
    const c = table.claim(wordsOf('c'));
    expect(table.find(wordsOf('b'))).toBe(-1);
    expect(table.find(wordsOf('a'))).toBe(a);
    expect(table.find(wordsOf('c'))).toBe(c);
    expect(table.size).toBe(2);
  });

  it('takes a stale entry before a used one', () => {
    const table = new HashSlotTable(2);
    const a = table.claim(wordsOf('a'));
    const b = table.claim(wordsOf('b'));
    table.touch(a);
    table.touch(b);
    expect(table.claim(wordsOf('c'), (entry) => entry === b)).toBe(b);
    expect(table.find(wordsOf('a'))).toBe(a);
  });

  it('refuses a capacity that is not a whole number ≥ 1', () => {
    expect(() => new HashSlotTable(0)).toThrow(RangeError);
    expect(() => new HashSlotTable(1.5)).toThrow(RangeError);
  });

  it('chooses the same entries as the obvious CLOCK over a list, whatever the operations (probe runs and their repair included)', () => {
    const names = Array.from({ length: 24 }, (_, i) => `hash-${i}`);
    const words = new Map(names.map((name) => [name, wordsOf(name)]));
    const operation = fc.oneof(
      fc.record({ op: fc.constant('claim' as const), name: fc.constantFrom(...names), stale: fc.integer({ min: -1, max: 15 }) }),
      fc.record({ op: fc.constant('find' as const), name: fc.constantFrom(...names) }),
      fc.record({ op: fc.constant('touch' as const), name: fc.constantFrom(...names) }),
    );
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 12 }), fc.array(operation, { maxLength: 300 }), (capacity, operations) => {
        const table = new HashSlotTable(capacity);
        const model = new ClockModel(capacity);
        for (const step of operations) {
          const hash = words.get(step.name)!;
          if (step.op === 'claim') {
            const isStale = (entry: number) => entry === step.stale;
            expect(table.claim(hash, isStale)).toBe(model.claim(step.name, isStale));
          } else if (step.op === 'find') {
            expect(table.find(hash)).toBe(model.find(step.name));
          } else {
            const entry = model.find(step.name);
            expect(table.find(hash)).toBe(entry);
            if (entry >= 0) {
              table.touch(entry);
              model.touch(entry);
            }
          }
          expect(table.size).toBeLessThanOrEqual(capacity);
        }
        for (const name of names) expect(table.find(words.get(name)!)).toBe(model.find(name));
      }),
      { numRuns: 300 },
    );
  });
});
