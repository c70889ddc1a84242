import { readFileSync } from 'node:fs';
import { join } from 'node:path';

/** package.json's version; the file sits two folders up from both src/platform/ and dist/platform/ (the image copies it too). */
export function packageVersion(): string {
  return (JSON.parse(readFileSync(join(__dirname, '..', '..', 'package.json'), 'utf8')) as { version: string }).version;
}
