import type { OperatorTokenStore } from '../ports/operator-tokens';
import type { Settings } from '../platform/settings';
import { MemoryOperatorTokens } from './memory-operator-tokens';
import { RedisOperatorTokens } from './redis/redis-operator-tokens';

/** Operator tokens live where the keys do: in Redis when configured, otherwise in process. */
export async function openOperatorTokens(settings: Settings): Promise<OperatorTokenStore> {
  if (!settings.redis) return new MemoryOperatorTokens();
  return RedisOperatorTokens.connect(settings.redis, settings.redisAdminTimeoutMs);
}
