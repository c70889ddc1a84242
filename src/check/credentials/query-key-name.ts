import { QUERY_KEY_PARAMETER } from './extract-credential';

/**
 * Envoy removes `query_parameters_to_remove` by the parameter's raw,
 * undecoded name (ext_authz parses the query with decode_params=false and
 * erases exact matches), while we read the query decoded, as the upstream
 * will. A parameter whose name only decodes to `key` (`k%65y`, `%6B%65%79`,
 * or `?key` after a second `?`, which URL parsers drop) would be read as the
 * key here yet never removed there. Returns the first such raw name.
 *
 * Called only when the decoded query has a `key` parameter, so ordinary
 * requests pay nothing for it.
 */
export function unremovableQueryKeyName(rawQuery: string): string | undefined {
  let start = 0;
  while (start < rawQuery.length) {
    let end = rawQuery.indexOf('&', start);
    if (end === -1) end = rawQuery.length;
    const equals = rawQuery.indexOf('=', start);
    const name = rawQuery.slice(start, equals !== -1 && equals < end ? equals : end);
    // Only a percent escape, or the leading '?' that URLSearchParams drops from the first part, can turn another name into `key`.
    const disguisable = name.includes('%') || (start === 0 && name.startsWith('?'));
    if (name !== QUERY_KEY_PARAMETER && disguisable && decodedName(name, start === 0) === QUERY_KEY_PARAMETER) return name;
    start = end + 1;
  }
  return undefined;
}

/** The name exactly as URLSearchParams decodes it; the leading '&' keeps a later part's '?' from being dropped. */
function decodedName(rawName: string, isFirstPart: boolean): string | undefined {
  for (const name of new URLSearchParams(isFirstPart ? `${rawName}=` : `&${rawName}=`).keys()) return name;
  return undefined;
}
