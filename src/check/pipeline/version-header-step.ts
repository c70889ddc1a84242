import type { FamilyHeaderRules } from '../routes/family-header-rules';
import { denial } from '../deny-reasons';
import type { PipelineSettings } from './pipeline-settings';

const DATE_FORM = /^\d{4}-\d{2}-\d{2}$/;

export type VersionCheck =
  { ok: true } | { ok: false; reason: 'missing_version_header' | 'unsupported_version'; message: string; param: string };

const VERSION_OK: VersionCheck = Object.freeze({ ok: true });

/** Messages-style requests must name an API version this gateway accepts. */
export function checkVersionHeader(
  headers: Readonly<Record<string, string>>,
  rules: FamilyHeaderRules,
  settings: PipelineSettings,
): VersionCheck {
  if (!rules.requiresVersionHeader) return VERSION_OK;
  const names = settings.headerNames.versionHeaders;
  const accepted = settings.acceptedVersions;
  let present = false;
  for (const name of names) {
    const raw = headers[name];
    if (raw === undefined) continue;
    present = true;
    const value = raw.trim();
    if (!DATE_FORM.test(value) || !accepted.includes(value)) {
      return { ok: false, ...denial('unsupported_version', { header: name, accepted }), param: name };
    }
  }
  if (present) return VERSION_OK;
  const specName = names[0]!;
  return { ok: false, ...denial('missing_version_header', { header: specName, accepted }), param: specName };
}
