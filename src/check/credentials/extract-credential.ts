import { denial, type DenyReason } from '../deny-reasons';
import { describeSources, headersOfSource, type CredentialSource, type FamilyHeaderRules } from '../routes/family-header-rules';
import type { HeaderNames } from '../routes/header-names';
import { parseAuthorization, splitRepeatedHeader } from './authorization-header';

export const QUERY_KEY_PARAMETER = 'key';

export interface CredentialRequest {
  headers: Readonly<Record<string, string>>;
  /** URLSearchParams, or anything as readable. */
  query: { getAll(name: string): string[] };
}

export interface CredentialOptions {
  names: HeaderNames;
  /** Operator setting: accept `?key=` on routes whose family allows it. */
  acceptQueryKey: boolean;
}

export type CredentialResult =
  { ok: true; credential: string; source: string } | { ok: false; reason: DenyReason; message: string; param?: string };

/** Takes the one customer credential a request carries, by its route family's rules. */
export function extractCredential(request: CredentialRequest, rules: FamilyHeaderRules, options: CredentialOptions): CredentialResult {
  const { names } = options;
  const candidates: { value: string; source: string }[] = [];

  for (const source of rules.credentialSources) {
    for (const header of headersOfSource(source, names)) {
      const raw = request.headers[header];
      if (raw === undefined) continue;
      const problem = collect(source, header, raw, candidates);
      if (problem) return problem;
    }
  }
  const queryKeys = request.query.getAll(QUERY_KEY_PARAMETER).filter((value) => value !== '');
  if (rules.queryKeyAllowed && options.acceptQueryKey) {
    for (const value of queryKeys) candidates.push({ value, source: `query:${QUERY_KEY_PARAMETER}` });
  }

  if (candidates.length === 0) {
    if (queryKeys.length > 0) {
      return {
        ok: false,
        ...denial('query_key_not_accepted', { parameter: QUERY_KEY_PARAMETER, ways: describeSources(rules, names) }),
        param: QUERY_KEY_PARAMETER,
      };
    }
    const ignored = names.allCredentialHeaders.find(
      (header) => request.headers[header] !== undefined && !rules.credentialSources.some((s) => headersOfSource(s, names).includes(header)),
    );
    const ways = describeSources(rules, names);
    return { ok: false, ...denial('missing_credential', ignored ? { ways, unreadHeader: ignored } : { ways }) };
  }

  if (candidates.length > 1 && new Set(candidates.map((candidate) => candidate.value)).size > 1) {
    return { ok: false, ...denial('conflicting_credentials', { sources: [...new Set(candidates.map((c) => c.source))] }) };
  }
  const first = candidates[0]!;
  return { ok: true, credential: first.value, source: first.source };
}

function collect(
  source: CredentialSource,
  header: string,
  raw: string,
  candidates: { value: string; source: string }[],
): CredentialResult | undefined {
  const values = splitRepeatedHeader(raw);
  for (const value of values) {
    if (source !== 'authorization-bearer') {
      candidates.push({ value, source: header });
      continue;
    }
    const parsed = parseAuthorization(value);
    if (parsed.ok) {
      candidates.push({ value: parsed.token, source: header });
    } else if (parsed.problem === 'not_bearer') {
      return { ok: false, ...denial('invalid_authorization_scheme'), param: header };
    } else if (parsed.problem === 'not_one_token') {
      return { ok: false, ...denial('malformed_authorization_header'), param: header };
    }
    // An empty `Bearer` is the same as no key: fall through to missing_credential.
  }
  return undefined;
}
