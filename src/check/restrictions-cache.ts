import { NO_RESTRICTIONS, type EffectiveRestrictions } from './pipeline/restriction-step';

/**
 * Distinct restriction texts whose compiled form is shared between keys. Keys of one account, or keys made from one
 * template, carry the same texts; compiled once each, 200,000 restricted keys hold one compiled form, not 200,000
 * (about 1.4 KB each: 275 MB, past the heap the image gives the process). Past this many, new texts are compiled per
 * key again: memory then grows with the keys, as the key cache's bound allows.
 */
const MAX_SHARED_TEXTS = 10_000;

/**
 * Each restricted key's restrictions, as this replica last read them from the store (the authorize script's
 * `restrictions_changed` reply), by key id. Keys without restrictions are not held: NO_RESTRICTIONS stands for them,
 * so the common case costs no memory and no lookup beyond a Map miss. Nothing here can keep a stale restriction
 * alive: every Check sends the stamps of the texts it decided on, and the store answers a change (see RestrictionsSent).
 */
export class RestrictionsCache {
  private readonly byKeyId = new Map<string, EffectiveRestrictions>();
  private readonly byStamps = new Map<string, EffectiveRestrictions>();

  constructor(private readonly maxEntries: number) {}

  get(keyId: string): EffectiveRestrictions {
    return this.byKeyId.get(keyId) ?? NO_RESTRICTIONS;
  }

  set(keyId: string, restrictions: EffectiveRestrictions): void {
    this.byKeyId.delete(keyId);
    if (restrictions === NO_RESTRICTIONS) return;
    // The oldest entry makes room: one read back costs that key one more round trip, never a wrong decision.
    if (this.byKeyId.size >= this.maxEntries) this.byKeyId.delete(this.byKeyId.keys().next().value!);
    this.byKeyId.set(keyId, this.shared(restrictions));
  }

  /** The compiled form already held for the same texts, else this one, kept for the next key with them. */
  private shared(restrictions: EffectiveRestrictions): EffectiveRestrictions {
    // Equal stamps, equal texts. Stamps are base64url, where a space cannot stand: the pair is unambiguous.
    const stamps = `${restrictions.keyStamp} ${restrictions.accountStamp}`;
    const held = this.byStamps.get(stamps);
    if (held) return held;
    if (this.byStamps.size < MAX_SHARED_TEXTS) this.byStamps.set(stamps, restrictions);
    return restrictions;
  }
}
