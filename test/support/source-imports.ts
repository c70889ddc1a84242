import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

/** The project's src/ folder, for tests that check how its modules import each other. */
export const SRC = join(__dirname, '..', '..', 'src');

/** Every .ts file below a folder. */
export function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? sourceFiles(join(dir, entry.name)) : entry.name.endsWith('.ts') ? [join(dir, entry.name)] : [],
  );
}

/** Module specifiers of every import and export-from in a file. */
export function importsOf(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  return [...text.matchAll(/^\s*(?:import|export)\b[^'"]*?from\s+'([^']+)'/gm)].map((match) => match[1]!);
}
