import { NO_RESTRICTIONS, type EffectiveRestrictions } from './pipeline/restriction-step';

/**
 * Each restricted key's restrictions, as this replica last read them from the store (the authorize script's
 * `restrictions_changed` reply), by key id. Keys without restrictions are not held: NO_RESTRICTIONS stands for them,
 * so the common case costs no memory and no lookup beyond a Map miss. Nothing here can keep a stale restriction
 * alive: every Check sends the texts it decided on, and the store answers a change (see RestrictionsSent).
 */
export class RestrictionsCache {
  private readonly byKeyId = new Map<string, EffectiveRestrictions>();

  constructor(private readonly maxEntries: number) {}

  get(keyId: string): EffectiveRestrictions {
    return this.byKeyId.get(keyId) ?? NO_RESTRICTIONS;
  }

  set(keyId: string, restrictions: EffectiveRestrictions): void {
    this.byKeyId.delete(keyId);
    if (restrictions === NO_RESTRICTIONS) return;
    // The oldest entry makes room: one read back costs that key one more round trip, never a wrong decision.
    if (this.byKeyId.size >= this.maxEntries) this.byKeyId.delete(this.byKeyId.keys().next().value!);
    this.byKeyId.set(keyId, restrictions);
  }
}
