import type { AuditEntryInput } from '../store/store';
import type { AdminServerDeps } from './admin-deps';

/**
 * Every admin mutation goes through here: one log line and one audit entry
 * (time, action, target, display prefix; never a key, hash or balance of
 * another account). An audit write that fails is logged, not hidden, but
 * does not undo the change already made.
 */
export async function recordAdminAction(deps: AdminServerDeps, entry: AuditEntryInput): Promise<void> {
  deps.logger.info({ event: 'admin', ...entry }, entry.action);
  try {
    await deps.store.appendAudit(entry, deps.clock.now());
  } catch (error) {
    deps.logger.error({ event: 'audit', action: entry.action, detail: (error as Error).message }, 'could not write the audit entry');
  }
}
