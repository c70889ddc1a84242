import { BlockList, isIP } from 'node:net';
import { lookup as dnsLookup } from 'node:dns/promises';

/**
 * Where a webhook may be sent (docs/concepts/webhooks.md, "Limits"): https
 * to a public address. An endpoint's URL names a host the customer controls,
 * and the service posts to it from inside the operator's network, so every
 * address a name resolves to is checked, when the endpoint is saved and again
 * on every delivery (a name may resolve elsewhere later: DNS rebinding), and
 * the connection goes to the address that was checked.
 */

export interface TargetPolicy {
  /** Loopback, private, shared and link-local ranges allowed (WEBHOOK_ALLOW_PRIVATE_TARGETS); the metadata addresses never are. */
  allowPrivate: boolean;
  /** Local development (WEBHOOK_LOOPBACK_HTTP): loopback allowed, and over plain http too. */
  loopbackHttp: boolean;
}

/** Resolves a host name to all its addresses; tests pass their own (no real DNS). */
export type ResolveHost = (hostname: string) => Promise<readonly { address: string; family: number }[]>;

export const systemResolver: ResolveHost = (hostname) => dnsLookup(hostname, { all: true, verbatim: true });

/** The defaults of the settings: public https targets only, resolved by the system. */
export const STRICT_TARGETS: { policy: TargetPolicy; resolve: ResolveHost } = Object.freeze({
  policy: Object.freeze({ allowPrivate: false, loopbackHttp: false }),
  resolve: systemResolver,
});

/** The cloud instance-metadata services (AWS, GCP, Azure: 169.254.169.254; AWS over IPv6: fd00:ec2::254): never a target. */
const METADATA = new BlockList();
METADATA.addAddress('169.254.169.254', 'ipv4');
METADATA.addAddress('fd00:ec2::254', 'ipv6');

const LOOPBACK = new BlockList();
LOOPBACK.addSubnet('127.0.0.0', 8, 'ipv4');
LOOPBACK.addAddress('::1', 'ipv6');

/** Not on the public internet: private (RFC 1918, ULA), shared (CGNAT), link-local, unspecified, multicast, reserved, documentation. */
const NON_PUBLIC = new BlockList();
for (const [network, prefix] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.0.2.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['198.51.100.0', 24],
  ['203.0.113.0', 24],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
] as const)
  NON_PUBLIC.addSubnet(network, prefix, 'ipv4');
for (const [network, prefix] of [
  ['::', 128],
  ['64:ff9b::', 96],
  ['100::', 64],
  ['2001:db8::', 32],
  ['fc00::', 7],
  ['fe80::', 10],
  ['ff00::', 8],
] as const)
  NON_PUBLIC.addSubnet(network, prefix, 'ipv6');

export type AddressRefusal = 'metadata' | 'loopback' | 'private';

/** Why the address may not be a target under the policy, or undefined when it may. */
export function addressRefusal(address: string, policy: TargetPolicy): AddressRefusal | undefined {
  let family = isIP(address) === 6 ? 'ipv6' : 'ipv4';
  // An IPv4 address written as IPv6 (::ffff:10.0.0.1) is checked as the IPv4 address it reaches.
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped) {
    address = mapped[1]!;
    family = 'ipv4';
  }
  const type = family as 'ipv4' | 'ipv6';
  if (METADATA.check(address, type)) return 'metadata';
  if (LOOPBACK.check(address, type)) return policy.loopbackHttp || policy.allowPrivate ? undefined : 'loopback';
  if (NON_PUBLIC.check(address, type)) return policy.allowPrivate ? undefined : 'private';
  return undefined;
}

const REFUSAL_TEXT: Record<AddressRefusal, string> = {
  metadata: 'a cloud metadata address',
  loopback: 'a loopback address',
  private: 'a private, link-local or reserved address',
};

/** A URL the service may post to, or why not (in words for the person who typed it). */
export function urlProblem(text: string, policy: TargetPolicy): string | undefined {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return 'not a URL';
  }
  if (url.username || url.password) return 'must not hold a user name or password';
  if (url.hash) return 'must not have a fragment';
  const host = hostOf(url);
  if (url.protocol === 'http:') {
    if (!policy.loopbackHttp || !isLoopbackName(host))
      return 'must be https:// (plain http:// only to a loopback host in local development)';
  } else if (url.protocol !== 'https:') return 'must be https://';
  if (isIP(host) !== 0) {
    const refusal = addressRefusal(host, policy);
    if (refusal) return `must not point at ${REFUSAL_TEXT[refusal]}`;
  }
  return undefined;
}

/** The URL's host as an address or name (IPv6 without its brackets). */
export function hostOf(url: URL): string {
  return url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
}

function isLoopbackName(host: string): boolean {
  return host === 'localhost' || (isIP(host) !== 0 && LOOPBACK.check(host, isIP(host) === 6 ? 'ipv6' : 'ipv4'));
}

/**
 * The address to connect to: the first the host resolves to, once every one is
 * allowed (one refused address refuses the host: a name that also points
 * inside is not sent to). Throws with the reason otherwise.
 */
export async function checkedAddress(
  host: string,
  policy: TargetPolicy,
  resolve: ResolveHost,
): Promise<{ address: string; family: number }> {
  const addresses = isIP(host) !== 0 ? [{ address: host, family: isIP(host) }] : await resolve(host);
  if (addresses.length === 0) throw new TargetRefusedError(`${host} resolves to no address`);
  for (const { address } of addresses) {
    const refusal = addressRefusal(address, policy);
    if (refusal) throw new TargetRefusedError(`${host} resolves to ${REFUSAL_TEXT[refusal]}`);
  }
  return addresses[0]!;
}

export class TargetRefusedError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'TargetRefusedError';
  }
}
