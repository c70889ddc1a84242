import { tokenPartOf } from '../credentials/authorization-header';
import { splitRepeatedHeader } from '../credentials/authorization-header';
import { QUERY_KEY_PARAMETER } from '../credentials/extract-credential';
import { upstreamProviderOf } from '../../keys/upstream-key-shapes';
import type { AuthRequest } from '../auth-request';
import type { HeaderNames } from '../routes/header-names';

/**
 * Looks at every place a credential could be, accepted by this route or not,
 * for something shaped like an upstream provider's key. Returns the provider
 * name only: the value itself must never travel further.
 */
export function findUpstreamProviderKey(
  request: AuthRequest,
  query: { getAll(name: string): string[] },
  names: HeaderNames,
): { provider: string; where: string } | undefined {
  for (const header of names.allCredentialHeaders) {
    const raw = request.headers[header];
    if (raw === undefined) continue;
    for (const value of splitRepeatedHeader(raw)) {
      const candidate = header === 'authorization' ? tokenPartOf(value) : value;
      const provider = upstreamProviderOf(candidate);
      if (provider) return { provider, where: header };
    }
  }
  for (const value of query.getAll(QUERY_KEY_PARAMETER)) {
    const provider = upstreamProviderOf(value);
    if (provider) return { provider, where: `?${QUERY_KEY_PARAMETER}=` };
  }
  return undefined;
}
