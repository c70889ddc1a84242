import { readFileSync } from 'node:fs';
import { join } from 'node:path';

/** package.json's version; the file sits two folders up from both src/runtime/ and dist/runtime/ (the image copies it too). */
export function packageVersion(): string {
  return (JSON.parse(readFileSync(join(__dirname, '..', '..', 'package.json'), 'utf8')) as { version: string }).version;
}
