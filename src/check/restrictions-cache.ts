import { NO_RESTRICTIONS, type EffectiveRestrictions } from './pipeline/restriction-step';

/**
 * Distinct restrictions whose compiled form is shared between keys. Keys of one account, or keys made from one
 * template, carry the same texts; compiled once each, 200,000 restricted keys hold one compiled form, not 200,000
 * (about 1.4 KB each: 275 MB, past the heap the image gives the process). Past this many, new ones are compiled per
 * key again: memory then grows with the keys, as the key cache's bound allows.
 */
const MAX_SHARED_FORMS = 10_000;

/** Where each key's restrictions are kept: the key cache's entry of its hash (CachedKeyIndex), let go with it. */
export interface KeyEntryAttachments {
  attachment(keyHash: string): unknown;
  attach(keyHash: string, value: unknown): void;
}

/**
 * Each restricted key's restrictions, as this replica last read them from the store (the authorize script's
 * `restrictions_changed` reply), by key hash, in the key cache's entries: a Check of a restricted key reads them in the
 * entry its key lookup has just found, where a map of their own, as large as the key cache, cost a second lookup of
 * 0.8 to 2.6 µs with 200,000 keys (docs/concepts/key-restrictions.md), and held a string per key for the garbage
 * collector to mark. Keys without restrictions are not held: NO_RESTRICTIONS stands for them. A key the key cache
 * does not hold is read from the store on each Check (one more round trip), never decided on what it had. Nothing
 * here can keep a stale restriction alive: every Check sends the stamps of the texts it decided on, and the store
 * answers a change (see RestrictionsSent).
 */
export class RestrictionsCache {
  private readonly byStamps = new Map<string, EffectiveRestrictions>();

  constructor(private readonly entries: KeyEntryAttachments) {}

  get(keyHash: string): EffectiveRestrictions {
    return (this.entries.attachment(keyHash) as EffectiveRestrictions | undefined) ?? NO_RESTRICTIONS;
  }

  set(keyHash: string, restrictions: EffectiveRestrictions): void {
    this.entries.attach(keyHash, restrictions === NO_RESTRICTIONS ? undefined : this.shared(restrictions));
  }

  /** The compiled form already held for the same stamps, else this one, kept for the next key with them. */
  private shared(restrictions: EffectiveRestrictions): EffectiveRestrictions {
    // Equal stamps, equal texts. Stamps are base64url, where a space cannot stand: the pair is unambiguous.
    const stamps = `${restrictions.keyStamp} ${restrictions.accountStamp}`;
    const held = this.byStamps.get(stamps);
    if (held) return held;
    if (this.byStamps.size < MAX_SHARED_FORMS) this.byStamps.set(stamps, restrictions);
    return restrictions;
  }
}
