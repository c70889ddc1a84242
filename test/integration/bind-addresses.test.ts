/**
 * Where the servers listen, read from the kernel's own socket tables
 * (/proc/net/tcp and tcp6), not from what the service says: under `npm
 * start`'s environment (no *_BIND_ADDRESS set) every port is on 127.0.0.1
 * and nothing answers on this machine's other addresses; IPv6 literals,
 * bracketed or not, are listened on as given.
 */
import { readFileSync } from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import { startServerProcess, type ServerProcess } from '../support/server-process';

jest.setTimeout(60_000);

const LISTEN = '0A';

/** An address as /proc/net/tcp{,6} writes it: 32-bit words, each in host (little-endian) byte order. */
function procAddress(hex: string): string {
  const bytes = Buffer.from(hex, 'hex');
  for (let word = 0; word < bytes.length; word += 4) bytes.subarray(word, word + 4).reverse();
  if (bytes.length === 4) return [...bytes].join('.');
  const groups: string[] = [];
  for (let i = 0; i < 16; i += 2) groups.push(bytes.readUInt16BE(i).toString(16));
  // The URL parser writes an IPv6 address in its canonical, compressed form.
  return new URL(`http://[${groups.join(':')}]/`).hostname.slice(1, -1);
}

/** Every address the kernel has a listening TCP socket on for `port`. */
function listeningAddresses(port: number): string[] {
  const found: string[] = [];
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    for (const line of readFileSync(table, 'utf8').split('\n').slice(1)) {
      const [, local, , state] = line.trim().split(/\s+/);
      if (local === undefined || state !== LISTEN) continue;
      const [address, portHex] = local.split(':');
      if (parseInt(portHex!, 16) === port) found.push(procAddress(address!));
    }
  }
  return found.sort();
}

interface ListeningLine {
  grpcPort: number;
  adminPort: number;
  customerPort: number;
  grpc: string;
  admin: string;
  customer: string;
}

function listeningLine(server: ServerProcess): ListeningLine {
  const line = server
    .output()
    .split('\n')
    .find((entry) => entry.includes('gateway-authz listening'));
  return JSON.parse(line!) as ListeningLine;
}

function portsOf(server: ServerProcess): { grpc: number; admin: number; customer: number } {
  const logged = listeningLine(server);
  return { grpc: logged.grpcPort, admin: logged.adminPort, customer: logged.customerPort };
}

/** Resolves with the connection's outcome: 'connected' or the error code. */
function tryConnect(host: string, port: number): Promise<string> {
  return new Promise((resolve) => {
    const socket = net.connect({ host, port });
    socket.once('connect', () => {
      socket.destroy();
      resolve('connected');
    });
    socket.once('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? error.message));
  });
}

/** This machine's addresses other than loopback (none in some sandboxes; then that half has nothing to try). */
const otherAddresses = Object.values(os.networkInterfaces())
  .flat()
  .filter((entry) => entry !== undefined && !entry.internal && !entry.address.startsWith('fe80:'))
  .map((entry) => entry!.address);

const hasIpv6Loopback = readFileSync('/proc/net/if_inet6', 'utf8')
  .split('\n')
  .some((line) => line.startsWith('00000000000000000000000000000001'));

describe('bind addresses', () => {
  let server: ServerProcess | undefined;
  afterEach(async () => {
    await server?.stop();
    server = undefined;
  });

  it("under npm start's defaults, the gRPC, admin and customer ports listen on 127.0.0.1 only", async () => {
    // Only the ports are given (free ones, so the test can run beside a local service); no bind address.
    server = await startServerProcess({});
    const ports = portsOf(server);
    // The start-up line says where each listener is, as a client would write it.
    expect(listeningLine(server)).toMatchObject({
      grpc: `127.0.0.1:${ports.grpc}`,
      admin: `http://127.0.0.1:${ports.admin}`,
      customer: `http://127.0.0.1:${ports.customer}`,
    });
    for (const port of Object.values(ports)) {
      expect(listeningAddresses(port)).toEqual(['127.0.0.1']);
      expect(await tryConnect('127.0.0.1', port)).toBe('connected');
      for (const address of otherAddresses) expect([address, await tryConnect(address, port)]).toEqual([address, 'ECONNREFUSED']);
    }
  });

  (hasIpv6Loopback ? it : it.skip)('listens on IPv6 literals as given, bracketed or not, each server on its own', async () => {
    server = await startServerProcess({ GRPC_BIND_ADDRESS: '[::1]', ADMIN_BIND_ADDRESS: '::1', CUSTOMER_BIND_ADDRESS: '::' });
    const ports = portsOf(server);
    expect(listeningLine(server)).toMatchObject({
      grpc: `[::1]:${ports.grpc}`,
      admin: `http://[::1]:${ports.admin}`,
      customer: `http://[::]:${ports.customer}`,
    });
    expect(listeningAddresses(ports.grpc)).toEqual(['::1']);
    expect(listeningAddresses(ports.admin)).toEqual(['::1']);
    expect(listeningAddresses(ports.customer)).toEqual(['::']);
    const health = await fetch(`http://[::1]:${ports.admin}/healthz`);
    expect(health.status).toBe(200);
    expect(await tryConnect('::1', ports.grpc)).toBe('connected');
    expect(await tryConnect('127.0.0.1', ports.grpc)).toBe('ECONNREFUSED');
  });
});
