import type { AuditEntryInput } from '../ports/store';
import type { ActionDeps } from './action-deps';

/**
 * Every change goes through here: one log line and one audit entry (time,
 * action, who made it, target, display prefix; never a key, hash or
 * balance). An audit write that fails is logged, not hidden, but does not
 * undo the change already made.
 */
export async function recordChange(deps: ActionDeps, entry: AuditEntryInput): Promise<void> {
  deps.logger.info({ event: entry.actor.kind === 'operator' ? 'admin' : 'customer', ...entry }, entry.action);
  try {
    await deps.store.appendAudit(entry, deps.clock.now());
  } catch (error) {
    deps.logger.error({ event: 'audit', action: entry.action, detail: (error as Error).message }, 'could not write the audit entry');
  }
}
