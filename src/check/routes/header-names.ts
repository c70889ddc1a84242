/**
 * The spec names two headers with a neutral word (`vendora-version`,
 * `x-vendorg-api-key`); official SDKs send the vendor spellings
 * (`anthropic-version`, `x-goog-api-key`). Both are accepted unless the
 * operator restricts to the spec's names.
 */
export interface HeaderNames {
  /** Accepted spellings of the messages-style version header, spec name first. */
  versionHeaders: readonly string[];
  /** Accepted spellings of the generative-style key header, spec name first. */
  vendorgKeyHeaders: readonly string[];
  /** Every header that may carry a credential in any spelling: always stripped, always scanned. */
  allCredentialHeaders: readonly string[];
}

export const SPEC_VERSION_HEADER = 'vendora-version';
export const VENDOR_VERSION_HEADER = 'anthropic-version';
export const SPEC_VENDORG_KEY_HEADER = 'x-vendorg-api-key';
export const VENDOR_VENDORG_KEY_HEADER = 'x-goog-api-key';
export const AUTHORIZATION_HEADER = 'authorization';
export const X_API_KEY_HEADER = 'x-api-key';

export function headerNamesFor(acceptVendorSpellings: boolean): HeaderNames {
  return Object.freeze({
    versionHeaders: acceptVendorSpellings ? [SPEC_VERSION_HEADER, VENDOR_VERSION_HEADER] : [SPEC_VERSION_HEADER],
    vendorgKeyHeaders: acceptVendorSpellings ? [SPEC_VENDORG_KEY_HEADER, VENDOR_VENDORG_KEY_HEADER] : [SPEC_VENDORG_KEY_HEADER],
    // Stripping and upstream-key scanning ignore the spelling setting: a
    // credential in a header we do not accept must still never reach upstream.
    allCredentialHeaders: [AUTHORIZATION_HEADER, X_API_KEY_HEADER, SPEC_VENDORG_KEY_HEADER, VENDOR_VENDORG_KEY_HEADER],
  });
}
