import { parseCustomerKey } from './customer-key';

/**
 * Shapes of upstream LLM provider keys (after gitleaks and trufflehog rules).
 * Customers sometimes paste their provider key into our SDK config; we refuse
 * it by name so they know what went wrong, and never log or echo any of it.
 * Order matters: the more specific `sk-` families come before the generic one.
 */
export interface UpstreamKeyShape {
  provider: string;
  pattern: RegExp;
}

export const UPSTREAM_KEY_SHAPES: readonly UpstreamKeyShape[] = Object.freeze([
  { provider: 'Anthropic', pattern: /^sk-ant-[A-Za-z0-9_-]{8,}/ },
  { provider: 'OpenRouter', pattern: /^sk-or-[A-Za-z0-9_-]{8,}/ },
  { provider: 'OpenAI', pattern: /^sk-(?:proj|svcacct|admin|None)-[A-Za-z0-9_-]{8,}/ },
  { provider: 'OpenAI', pattern: /T3BlbkFJ/ },
  { provider: 'OpenAI', pattern: /^sk-[A-Za-z0-9_-]{16,}$/ },
  { provider: 'Google', pattern: /^AIza[0-9A-Za-z_-]{20,}/ },
  { provider: 'Groq', pattern: /^gsk_[A-Za-z0-9]{20,}/ },
  { provider: 'xAI', pattern: /^xai-[A-Za-z0-9_-]{20,}/ },
  { provider: 'Hugging Face', pattern: /^hf_[A-Za-z0-9]{20,}/ },
  { provider: 'Perplexity', pattern: /^pplx-[A-Za-z0-9]{20,}/ },
  { provider: 'Replicate', pattern: /^r8_[A-Za-z0-9]{20,}/ },
]);

/**
 * Every shape in one pattern: almost every credential (our own keys) matches
 * none, and one test of the union costs a fraction of testing each shape in
 * turn (test/bench/hot-path.ts). Only a match looks for which one.
 */
const ANY_UPSTREAM_KEY_SHAPE = unionOf(UPSTREAM_KEY_SHAPES);

function unionOf(shapes: readonly UpstreamKeyShape[]): RegExp {
  // A flag (i, m, …) would change what its pattern means inside the union.
  const flagged = shapes.find((shape) => shape.pattern.flags !== '');
  if (flagged) throw new Error(`upstream key shape for ${flagged.provider} has flags /${flagged.pattern.flags}: not allowed in the union`);
  return new RegExp(shapes.map((shape) => `(?:${shape.pattern.source})`).join('|'));
}

/** The provider a credential looks like it belongs to, or undefined. Our own valid keys never match. */
export function upstreamProviderOf(credential: string): string | undefined {
  if (!ANY_UPSTREAM_KEY_SHAPE.test(credential)) return undefined;
  const shape = UPSTREAM_KEY_SHAPES.find((candidate) => candidate.pattern.test(credential));
  // A random key body can contain a marker such as T3BlbkFJ; a key that
  // passes our checksum is ours whatever it contains. (Checked second: most
  // credentials match no shape, and then the checksum need not be computed.)
  if (!shape || parseCustomerKey(credential).ok) return undefined;
  return shape.provider;
}
