/**
 * The last day each Node.js major gets fixes, from the Node.js release
 * schedule (github.com/nodejs/Release). After it a major gets no security
 * fixes, which a service holding customer keys must not run on unnoticed.
 * Odd majors were short "Current" lines that never became LTS. Update this
 * table when a new major enters the schedule; docs/operations/runtime.md says which
 * majors the service is tested on.
 */
export const NODE_END_OF_LIFE: Readonly<Record<number, string>> = Object.freeze({
  18: '2025-04-30',
  19: '2023-06-01',
  20: '2026-04-30',
  21: '2024-06-01',
  22: '2027-04-30',
  23: '2025-06-01',
  24: '2028-04-30',
  25: '2026-06-01',
  26: '2029-04-30',
});

const MS_PER_DAY = 86_400_000;

export type NodeSupport =
  | { readonly status: 'supported'; readonly major: number; readonly endOfLife: string }
  | { readonly status: 'end-of-life'; readonly major: number; readonly endOfLife: string | undefined }
  /** Newer than the table: a release the schedule did not list yet, so not known to be unsupported. */
  | { readonly status: 'unlisted'; readonly major: number };

/** Where `version` (process.versions.node, e.g. "24.22.3") stands at `nowMs` (ms since the epoch). */
export function nodeSupport(version: string, nowMs: number): NodeSupport {
  const major = Number.parseInt(version.replace(/^v/, ''), 10);
  const listed = Object.keys(NODE_END_OF_LIFE).map(Number);
  const endOfLife = NODE_END_OF_LIFE[major];
  if (endOfLife === undefined) {
    // Below the table: older than every major it lists, so long past its end.
    return major < Math.min(...listed) ? { status: 'end-of-life', major, endOfLife: undefined } : { status: 'unlisted', major };
  }
  const [year, month, day] = endOfLife.split('-').map(Number) as [number, number, number];
  // The listed day is the last one with support: unsupported from the next midnight UTC.
  const unsupportedFromMs = Date.UTC(year, month - 1, day) + MS_PER_DAY;
  return nowMs >= unsupportedFromMs ? { status: 'end-of-life', major, endOfLife } : { status: 'supported', major, endOfLife };
}

export interface RuntimePolicy {
  /** NODE_ENV=production. */
  readonly production: boolean;
  /** ALLOW_END_OF_LIFE_NODE=true: start in production even on an end-of-life major. */
  readonly allowEndOfLifeNode: boolean;
}

/**
 * What `serve` does about the runtime: start quietly, start with a warning,
 * or refuse. Production refuses, because an image built on an unsupported
 * base should be caught by its first rollout rather than run for months; a
 * developer's machine only warns.
 */
export function runtimeVerdict(support: NodeSupport, policy: RuntimePolicy): 'start' | 'warn' | 'refuse' {
  if (support.status !== 'end-of-life') return 'start';
  return policy.production && !policy.allowEndOfLifeNode ? 'refuse' : 'warn';
}

/** The log message for an end-of-life major. */
export function endOfLifeMessage(support: Extract<NodeSupport, { status: 'end-of-life' }>, version: string): string {
  const since = support.endOfLife === undefined ? '' : ` on ${support.endOfLife}`;
  return `Node.js ${version} is end-of-life: its major (${support.major}) stopped getting security fixes${since}. Run a supported major (see docs/operations/runtime.md).`;
}
