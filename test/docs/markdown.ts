import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';

export const REPO_ROOT = join(__dirname, '..', '..');

/** README.md and every Markdown file under docs/, as paths relative to the repository root. */
export function documentationFiles(): string[] {
  const walk = (dir: string): string[] =>
    readdirSync(join(REPO_ROOT, dir), { withFileTypes: true }).flatMap((entry) =>
      entry.isDirectory() ? walk(join(dir, entry.name)) : entry.name.endsWith('.md') ? [join(dir, entry.name)] : [],
    );
  return ['README.md', ...walk('docs')].map((path) => relative(REPO_ROOT, join(REPO_ROOT, path)));
}

export function readDoc(path: string): string {
  return readFileSync(join(REPO_ROOT, path), 'utf8');
}

/** The lines outside fenced code blocks, with their 1-based numbers; inline code spans blanked. */
export function proseLines(text: string): { line: number; text: string }[] {
  const lines: { line: number; text: string }[] = [];
  let fence: string | undefined;
  text.split('\n').forEach((line, index) => {
    const marker = /^\s*(`{3,}|~{3,})/.exec(line)?.[1];
    if (marker && (fence === undefined || marker.startsWith(fence))) {
      fence = fence === undefined ? marker : undefined;
      return;
    }
    if (fence === undefined) lines.push({ line: index + 1, text: line.replace(/`+[^`]*`+/g, (span) => ' '.repeat(span.length)) });
  });
  return lines;
}

/** The text a heading shows, then its anchor as GitHub makes it: lower case, punctuation dropped, spaces to hyphens. */
export function headingSlug(heading: string): string {
  const shown = heading
    .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/[`*]/g, '')
    .trim();
  return shown
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\p{M} _-]/gu, '')
    .replace(/ /g, '-');
}

/** Every anchor a file's headings give, repeats numbered as GitHub numbers them (`-1`, `-2`). */
export function anchorsOf(text: string): Set<string> {
  const seen = new Map<string, number>();
  const anchors = new Set<string>();
  let fence = false;
  for (const line of text.split('\n')) {
    if (/^\s*```/.test(line)) fence = !fence;
    const heading = fence ? null : /^#{1,6} (.+?)#*\s*$/.exec(line);
    if (!heading) continue;
    const slug = headingSlug(heading[1]!);
    const count = seen.get(slug) ?? 0;
    seen.set(slug, count + 1);
    anchors.add(count === 0 ? slug : `${slug}-${count}`);
  }
  return anchors;
}

/** Inline links `[text](target)`, images and reference definitions `[id]: target` outside code, with the line each is on. */
export function linksOf(text: string): { line: number; target: string }[] {
  return proseLines(text).flatMap(({ line, text: prose }) => [
    ...[...prose.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)].map((match) => ({ line, target: match[1]! })),
    ...[...prose.matchAll(/^ {0,3}\[[^\]]+\]:\s*<?([^\s>]+)>?/g)].map((match) => ({ line, target: match[1]! })),
  ]);
}

/** The rows of the first table after `heading` (a line equal to it), as trimmed cells; the header row and rule left out. */
export function tableAfter(text: string, heading: string): string[][] {
  const lines = text.split('\n');
  const start = lines.indexOf(heading);
  if (start < 0) throw new Error(`no heading '${heading}'`);
  const first = lines.findIndex((line, index) => index > start && line.startsWith('|'));
  const rows: string[][] = [];
  for (let index = first + 2; index < lines.length && lines[index]!.startsWith('|'); index++)
    rows.push(
      lines[index]!.slice(1, -1)
        .split(/(?<!\\)\|/)
        .map((cell) => cell.trim()),
    );
  return rows;
}

/** The text of one section: from the line `heading` to the next heading of the same or a higher level. */
export function sectionOf(text: string, heading: string): string {
  const lines = text.split('\n');
  const start = lines.indexOf(heading);
  if (start < 0) throw new Error(`no heading '${heading}'`);
  const level = /^#+/.exec(heading)![0].length;
  let end = start + 1;
  let fence = false;
  for (; end < lines.length; end++) {
    if (/^\s*```/.test(lines[end]!)) fence = !fence;
    const hashes = fence ? undefined : /^(#+) /.exec(lines[end]!)?.[1];
    if (hashes && hashes.length <= level) break;
  }
  return lines.slice(start, end).join('\n');
}
