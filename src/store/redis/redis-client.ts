import Redis, { Cluster, type RedisOptions } from 'ioredis';
import type { RedisTopology } from '../../platform/settings';
import { StoreUnavailableError } from '../../ports/store';
import { PipelinedConnection, type CheckChannel, type RedisAddress } from './check-connection';
import { ClusterCheckChannel } from './cluster-check-channel';
import { withinDeadline } from './deadline';
import { REDIS_SCRIPTS, takesKeyList, type ScriptCommands } from './scripts';

/**
 * The Redis driver: connections for each topology (standalone, Sentinel,
 * Cluster) with the scripts defined on them, the Check path's channel, and
 * how a topology is named in logs. What the store does with Redis is in
 * redis-store.ts.
 */
export type ScriptedRedis = Redis & ScriptCommands;

/**
 * openClient, connected and answering PING: a Redis that cannot be reached fails here, at start, as
 * StoreUnavailableError naming the topology and what the connection is `for`, never on the first request.
 */
export async function connectedClient(topology: RedisTopology, commandTimeoutMs: number, purpose: string): Promise<ScriptedRedis> {
  const redis = openClient(topology, commandTimeoutMs);
  try {
    await redis.connect();
    await redis.ping();
  } catch (error) {
    redis.disconnect();
    throw new StoreUnavailableError(`cannot reach ${describeTopology(topology)} for ${purpose}: ${(error as Error).message}`, {
      cause: error,
    });
  }
  return redis;
}

/**
 * One connection (or cluster client) with its own command deadline and the scripts defined on it.
 * `resendAfterLoss` (Cluster only): whether a command whose connection closed is sent again, see below.
 */
export function openClient(topology: RedisTopology, commandTimeoutMs: number | undefined, resendAfterLoss = true): ScriptedRedis {
  const connection: RedisOptions = {
    lazyConnect: true,
    ...(commandTimeoutMs !== undefined ? { commandTimeout: commandTimeoutMs } : {}),
    // Fail fast instead of queueing while disconnected: a queued Check
    // would outlive Envoy's deadline anyway.
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    connectTimeout: 2000,
    // After a failed connect, ioredis otherwise keeps a 2 s timer alive on close.
    disconnectTimeout: 100,
    retryStrategy: reconnectDelayMs,
  };
  let redis: ScriptedRedis;
  switch (topology.mode) {
    case 'standalone':
      redis = new Redis(topology.url, connection) as ScriptedRedis;
      break;
    case 'sentinel':
      redis = new Redis({
        ...connection,
        sentinels: topology.sentinels.map(({ host, port }) => ({ host, port })),
        name: topology.masterName,
        ...(topology.password ? { password: topology.password } : {}),
      }) as ScriptedRedis;
      break;
    case 'cluster':
      // Every key a script touches shares the account's hash tag, so each
      // script runs on the one node that owns that slot.
      redis = new Cluster(
        topology.nodes.map(({ host, port }) => ({ host, port })),
        {
          lazyConnect: true,
          enableOfflineQueue: false,
          scaleReads: 'master',
          // ioredis sends a command again 100 ms after "Connection is closed", whether it was never written (its
          // node's connection was still opening) or written and its reply lost: then it may have run, and a Check's
          // script would count twice. The Check channel turns that off (its nodes are connected before it is used,
          // openCheckChannel), and fails such a command as the pipelined connection does. Admin calls keep it: their
          // node connections open on demand, and refusing the first command to each would fail them at random.
          ...(resendAfterLoss ? {} : { retryDelayOnFailover: 0 }),
          slotsRefreshTimeout: 2000,
          clusterRetryStrategy: reconnectDelayMs,
          redisOptions: {
            ...(commandTimeoutMs !== undefined ? { commandTimeout: commandTimeoutMs } : {}),
            maxRetriesPerRequest: 0,
            connectTimeout: 2000,
            disconnectTimeout: 100,
            ...(topology.password ? { password: topology.password } : {}),
          },
        },
      ) as unknown as ScriptedRedis;
      break;
  }
  for (const [name, script] of Object.entries(REDIS_SCRIPTS)) {
    // Without numberOfKeys, ioredis takes the number of keys as the call's first argument.
    redis.defineCommand(name, takesKeyList(script) ? { lua: script.lua } : { numberOfKeys: script.keys.length, lua: script.lua });
  }
  // Errors surface per command; without a listener ioredis would print them.
  redis.on('error', () => undefined);
  return redis;
}

/** Pause before reconnect attempt n: 50 ms more each time, at most a second. */
function reconnectDelayMs(attempt: number): number {
  return Math.min(50 * attempt, 1000);
}

const CONNECT_TIMEOUT_MS = 2000;

/**
 * The Check path's channel for a topology. Standalone and Sentinel get the
 * pipelined connection (check-connection.ts), reaching the server `admin`
 * is configured for (its options, as ioredis read the URL) or the master the
 * Sentinels name now; a Cluster gets ioredis, which knows the slots.
 */
export async function openCheckChannel(topology: RedisTopology, admin: Redis, deadlineMs: number): Promise<CheckChannel> {
  const options = { deadlineMs, connectTimeoutMs: CONNECT_TIMEOUT_MS, reconnectDelayMs };
  switch (topology.mode) {
    case 'standalone':
      return PipelinedConnection.open({ ...options, locate: () => Promise.resolve(addressOf(admin.options)) });
    case 'sentinel':
      return PipelinedConnection.open({ ...options, locate: () => masterNamedBySentinels(topology) });
    case 'cluster': {
      const cluster = openClient(topology, undefined, false) as unknown as Cluster;
      try {
        await cluster.connect();
        await connectMasters(cluster);
      } catch (error) {
        cluster.disconnect();
        throw error;
      }
      return new ClusterCheckChannel(cluster, deadlineMs);
    }
  }
}

/**
 * ioredis opens a node's connection on the first command for its slots, and
 * without its resend that command fails ("Connection is closed"): so every
 * master is connected, and answers a PING, before the first Check.
 */
async function connectMasters(cluster: Cluster): Promise<void> {
  await withinDeadline(
    Promise.all(
      cluster.nodes('master').map(async (node) => {
        if (node.status === 'wait') await node.connect();
        await node.ping();
      }),
    ),
    CONNECT_TIMEOUT_MS,
  );
}

/** Where an ioredis client made from a URL connects: the same server, database, credentials and TLS. */
function addressOf(options: RedisOptions): RedisAddress {
  return {
    host: options.host ?? 'localhost',
    port: options.port ?? 6379,
    ...(options.username ? { username: options.username } : {}),
    ...(options.password ? { password: options.password } : {}),
    ...(options.db ? { db: options.db } : {}),
    ...(options.family ? { family: options.family } : {}),
    // rediss:// (tls: true) or TLS options: the same TLS as the admin connection.
    ...(options.tls ? { tls: typeof options.tls === 'object' ? options.tls : {} } : {}),
  };
}

/** Asks each Sentinel in turn for the master's address, as ioredis does; the connection then checks ROLE. */
async function masterNamedBySentinels(topology: Extract<RedisTopology, { mode: 'sentinel' }>): Promise<RedisAddress> {
  const problems: string[] = [];
  for (const sentinel of topology.sentinels) {
    const probe = new Redis({
      host: sentinel.host,
      port: sentinel.port,
      lazyConnect: true,
      connectTimeout: CONNECT_TIMEOUT_MS,
      maxRetriesPerRequest: 0,
      enableOfflineQueue: false,
      retryStrategy: () => null,
      disconnectTimeout: 100,
    });
    probe.on('error', () => undefined);
    try {
      await probe.connect();
      const reply = await withinDeadline(probe.call('SENTINEL', 'get-master-addr-by-name', topology.masterName), CONNECT_TIMEOUT_MS);
      if (Array.isArray(reply) && typeof reply[0] === 'string' && reply[1] !== undefined) {
        return {
          host: reply[0],
          port: Number(reply[1]),
          ...(topology.password ? { password: topology.password } : {}),
          mustBeMaster: true,
        };
      }
      problems.push(`${sentinel.host}:${sentinel.port} knows no master '${topology.masterName}'`);
    } catch (error) {
      problems.push(`${sentinel.host}:${sentinel.port}: ${error instanceof Error ? error.message : String(error)}`);
    } finally {
      probe.disconnect();
    }
  }
  throw new StoreUnavailableError(`no Sentinel named the master: ${problems.join('; ')}`);
}

/** Quits politely, or drops the connection when Redis does not answer. */
export async function closeClient(client: Redis): Promise<void> {
  try {
    await client.quit();
  } catch {
    client.disconnect();
  }
}

/** For logs: where the data lives, without passwords. */
export function describeTopology(topology: RedisTopology): string {
  const list = (nodes: readonly { host: string; port: number }[]) => nodes.map(({ host, port }) => `${host}:${port}`).join(',');
  switch (topology.mode) {
    case 'standalone':
      return `Redis at ${redactUrl(topology.url)}`;
    case 'sentinel':
      return `Redis master '${topology.masterName}' via Sentinel ${list(topology.sentinels)}`;
    case 'cluster':
      return `Redis Cluster via ${list(topology.nodes)}`;
  }
}

/** Redis URLs may carry a password; never print it. */
export function redactUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = '***';
    return parsed.toString();
  } catch {
    return '(unparseable URL)';
  }
}
