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

/** The provider a credential looks like it belongs to, or undefined. Our own valid keys never match. */
export function upstreamProviderOf(credential: string): string | undefined {
  const shape = UPSTREAM_KEY_SHAPES.find((candidate) => candidate.pattern.test(credential));
  // A random key body can contain a marker such as T3BlbkFJ; a key that
  // passes our checksum is ours whatever it contains. (Checked second: most
  // credentials match no shape, and then the checksum need not be computed.)
  if (!shape || parseCustomerKey(credential).ok) return undefined;
  return shape.provider;
}
