import { configFileSchema } from '../../src/platform/config-file';
import { envSchema } from '../../src/platform/settings';
import { readDoc, tableAfter } from './markdown';

/** Refused at start with a message naming its replacements: accepted by the schema only to be refused, so no row of its own. */
const REFUSED_SETTINGS = ['BIND_ADDRESS'];

const settingsPage = readDoc('docs/configuration/settings.md');
const rows = tableAfter(settingsPage, '# Settings').map(([name, fallback]) => ({
  name: /^`([A-Z0-9_]+)`$/.exec(name!)?.[1] ?? name!,
  fallback: fallback!,
}));
const schemaFields = envSchema.shape as Record<string, { safeParse(value: unknown): { success: boolean; data?: string | number } }>;

describe('docs/configuration/settings.md: one table of every setting, held to the settings schema', () => {
  it('has a row for every setting the schema accepts, and no row for a setting it lacks', () => {
    const documented = rows.map((row) => row.name).sort();
    const accepted = Object.keys(schemaFields)
      .filter((name) => !REFUSED_SETTINGS.includes(name))
      .sort();
    expect(documented).toEqual(accepted);
  });

  it('says of each refused setting that it is refused', () => {
    for (const name of REFUSED_SETTINGS) expect(settingsPage).toContain(`The former \`${name}\` is refused at start`);
  });

  it("shows each setting's default as the schema applies it when the variable is unset", () => {
    for (const { name, fallback } of rows) {
      const parsed = schemaFields[name]!.safeParse(undefined);
      const applied = parsed.success && parsed.data !== undefined ? `\`${String(parsed.data)}\`` : 'unset';
      expect({ name, fallback: fallback.replace(/ \(.*\)$/, '') }).toEqual({ name, fallback: applied });
    }
  });
});

describe('docs/configuration/config-file.md: every field of the config file', () => {
  it('describes every top-level field the config file schema accepts, and no other', () => {
    const described = [...readDoc('docs/configuration/config-file.md').matchAll(/^- \*\*`([A-Za-z]+)`\*\*/gm)].map((match) => match[1]);
    expect([...new Set(described)].sort()).toEqual(Object.keys(configFileSchema.shape).sort());
  });
});
