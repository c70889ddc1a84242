import { readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { importsOf, sourceFiles, SRC } from '../../support/source-imports';

describe('admin imports point one way', () => {
  it('only app.ts imports admin-server.ts; the routes and helpers take their deps from admin-deps.ts', () => {
    const importers = sourceFiles(SRC)
      .filter((file) => importsOf(file).some((specifier) => /(^|\/)admin-server$/.test(specifier)))
      .map((file) => relative(SRC, file));
    expect(importers).toEqual(['app.ts']);
  });

  it('admin-deps.ts imports types only, and nothing from the admin HTTP modules', () => {
    const text = readFileSync(join(SRC, 'admin', 'admin-deps.ts'), 'utf8');
    const lines = text.split('\n').filter((line) => /^\s*import\b/.test(line));
    expect(lines.length).toBeGreaterThan(0);
    for (const line of lines) expect(line).toMatch(/^import type /);
    // admin-auth-limits.ts holds the limits' types and defaults (what the settings read), no HTTP.
    const adminModules = importsOf(join(SRC, 'admin', 'admin-deps.ts')).filter((specifier) => specifier.startsWith('./'));
    expect(adminModules.filter((specifier) => specifier !== './admin-auth-limits')).toEqual([]);
  });
});
