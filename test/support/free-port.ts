import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';

/**
 * The first port of the kernel's ephemeral range (Linux: /proc/sys/net/ipv4/ip_local_port_range, 32768 by default):
 * every outgoing connection takes its local port from that range, so a port chosen there (as `listen(0)` chooses)
 * can be taken by any connection a browser, Redis client or server opens before the test's process listens on it.
 */
function ephemeralRangeStart(): number {
  try {
    const start = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
    return Number.isInteger(start) && start > 2048 ? start : 32768;
  } catch {
    return 32768;
  }
}

const RANGE_END = ephemeralRangeStart() - 1;
const RANGE_START = Math.max(1024, RANGE_END - 10_000);
/** Where freePort chooses, both ends included. */
export const FREE_PORT_RANGE = { first: RANGE_START, last: RANGE_END };

/** Whether nothing listens on 127.0.0.1:`port` now. */
function isFree(port: number): Promise<boolean> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.unref();
    probe.once('error', (error: NodeJS.ErrnoException) =>
      error.code === 'EADDRINUSE' || error.code === 'EACCES' ? resolve(false) : reject(error),
    );
    probe.listen(port, '127.0.0.1', () => probe.close(() => resolve(true)));
  });
}

/**
 * A loopback port that was free a moment ago, for a process the test starts and must name the port of in advance
 * (a redirect URL, a config file). Chosen at random below the ephemeral range: only another test's choice can take
 * it before that process listens, not any connection opened meanwhile.
 */
export async function freePort(): Promise<number> {
  for (let attempt = 0; attempt < 100; attempt++) {
    const port = RANGE_START + Math.floor(Math.random() * (RANGE_END - RANGE_START + 1));
    if (await isFree(port)) return port;
  }
  throw new Error(`no free loopback port in ${RANGE_START}–${RANGE_END} after 100 tries`);
}
