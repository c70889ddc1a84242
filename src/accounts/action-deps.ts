import type { Clock } from '../platform/clock';
import type { Logger } from '../platform/logger';
import type { AdminStore } from '../ports/store';

/**
 * What the transport-independent actions need. The admin API (operator) and
 * the customer API (signed-in members) both call these actions, so a key is
 * minted, rotated, audited and capped the same way whoever asks.
 */
export interface ActionDeps {
  store: AdminStore;
  clock: Clock;
  logger: Logger;
}
