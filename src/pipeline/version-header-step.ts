import type { FamilyHeaderRules } from '../routes/family-header-rules';
import type { DenyReason } from '../domain/deny-reasons';
import type { PipelineSettings } from './pipeline-settings';

const DATE_FORM = /^\d{4}-\d{2}-\d{2}$/;

export type VersionCheck = { ok: true } | { ok: false; reason: DenyReason; message: string; param: string };

/** Messages-style requests must name an API version this gateway accepts. */
export function checkVersionHeader(
  headers: Readonly<Record<string, string>>,
  rules: FamilyHeaderRules,
  settings: PipelineSettings,
): VersionCheck {
  if (!rules.requiresVersionHeader) return { ok: true };
  const names = settings.headerNames.versionHeaders;
  const accepted = () => settings.acceptedVersions.map((v) => `'${v}'`).join(', ');
  const specName = names[0]!;
  const present = names.filter((name) => headers[name] !== undefined);
  if (present.length === 0) {
    return {
      ok: false,
      reason: 'missing_version_header',
      param: specName,
      message: `The '${specName}' header is required. Accepted values: ${accepted()}.`,
    };
  }
  for (const name of present) {
    const value = headers[name]!.trim();
    if (!DATE_FORM.test(value) || !settings.acceptedVersions.includes(value)) {
      return {
        ok: false,
        reason: 'unsupported_version',
        param: name,
        message: `The '${name}' header must be a date-form API version this gateway accepts. Accepted values: ${accepted()}.`,
      };
    }
  }
  return { ok: true };
}
