import { existsSync, statSync } from 'node:fs';
import { dirname, join, normalize } from 'node:path';
import { anchorsOf, documentationFiles, linksOf, readDoc, REPO_ROOT, sectionOf } from './markdown';

/** Longer lines are unreadable in a terminal or a diff; tables and code blocks included, none is exempt. */
const MAX_LINE_LENGTH = 200;
/** The README is the front page: what it is, the two commands, "Try it locally" and where to go next. The rest is in docs/. */
const MAX_README_LINES = 250;

const files = documentationFiles();

describe('the documentation stays true', () => {
  it('covers the README and the pages under docs/', () => {
    expect(files).toContain('README.md');
    expect(files).toContain(join('docs', 'README.md'));
  });

  it('every relative link points at a file that exists, and every #anchor at a heading of that file', () => {
    const broken: string[] = [];
    for (const file of files) {
      for (const { line, target } of linksOf(readDoc(file))) {
        if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // https:, mailto: … are outside this repository
        const [pathPart, anchor] = target.split('#', 2) as [string, string | undefined];
        const resolved = pathPart === '' ? file : normalize(join(dirname(file), decodeURIComponent(pathPart)));
        const where = `${file}:${line} → ${target}`;
        if (resolved.startsWith('..') || !existsSync(join(REPO_ROOT, resolved))) {
          broken.push(`${where} (no such file)`);
          continue;
        }
        if (anchor === undefined) continue;
        if (!resolved.endsWith('.md') || statSync(join(REPO_ROOT, resolved)).isDirectory()) {
          broken.push(`${where} (an anchor into a file that is not Markdown)`);
          continue;
        }
        if (!anchorsOf(readDoc(resolved)).has(anchor)) broken.push(`${where} (no heading with that anchor)`);
      }
    }
    expect(broken).toEqual([]);
  });

  it(`has no line over ${MAX_LINE_LENGTH} characters`, () => {
    const long = files.flatMap((file) =>
      readDoc(file)
        .split('\n')
        .flatMap((line, index) => ([...line].length > MAX_LINE_LENGTH ? [`${file}:${index + 1} (${[...line].length})`] : [])),
    );
    expect(long).toEqual([]);
  });

  it(`keeps the README to at most ${MAX_README_LINES} lines`, () => {
    expect(readDoc('README.md').trimEnd().split('\n').length).toBeLessThanOrEqual(MAX_README_LINES);
  });

  it('shows the two commands a newcomer needs in the README: one runs the service, one runs the tests', () => {
    const commands = sectionOf(readDoc('README.md'), '## The two commands');
    expect(commands).toMatch(/^npm ci && npm start\b/m);
    expect(commands).toMatch(/^npm ci && npm test\b/m);
  });

  it('links the decisions taken where the spec says "not shown" from the README', () => {
    expect(linksOf(readDoc('README.md')).map((link) => link.target)).toContain('docs/design/decisions.md');
    expect(readDoc('docs/design/decisions.md')).toContain('**Key format and length**');
  });
});
