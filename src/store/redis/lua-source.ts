import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';

/**
 * The store's Lua scripts are files in `lua/` next to this module: in src/
 * for the tests, and copied beside the JavaScript by every build
 * (tools/copy-lua.js). A script is read once, when the store's modules load,
 * and runs as read: nothing is generated per plan or per call (the authorize
 * script takes the default plan as an argument).
 */
export const LUA_DIR = path.join(__dirname, 'lua');

/**
 * `--@include lib/x.lua` on a line of its own: the helper file's text in its
 * place, indented as the line is (inside a function, its locals are made
 * only when the function runs). Redis runs each script on its own, so
 * helpers shared by several scripts are written once and included. A helper
 * may include others (the authorize script's parts include the arithmetic
 * they share), never itself, however indirectly.
 */
const INCLUDE = /^(\s*)--@include (\S+\.lua)$/;

/** A script's text as Redis runs it, and for each of its lines the file and line it comes from (for luacheck's reports). */
export interface ComposedLua {
  readonly text: string;
  readonly origins: readonly { readonly file: string; readonly line: number }[];
}

function linesOf(dir: string, file: string): string[] {
  let text: string;
  try {
    text = fs.readFileSync(path.join(dir, file), 'utf8');
  } catch (error) {
    throw new Error(`cannot read the Lua script ${file} in ${dir} (a build copies src/store/redis/lua there): ${String(error)}`);
  }
  const lines = text.split('\n');
  if (lines.at(-1) === '') lines.pop();
  return lines;
}

function compose(
  dir: string,
  file: string,
  indent: string,
  within: readonly string[],
  into: { lines: string[]; origins: { file: string; line: number }[] },
): void {
  if (within.includes(file)) throw new Error(`${file} includes itself (through ${within.join(' → ')})`);
  linesOf(dir, file).forEach((text, i) => {
    const include = INCLUDE.exec(text);
    if (include === null) {
      into.lines.push(text === '' ? '' : `${indent}${text}`);
      into.origins.push({ file, line: i + 1 });
      return;
    }
    const [, more = '', included = ''] = include;
    compose(dir, included, `${indent}${more}`, [...within, file], into);
  });
}

/** `file` (a path inside lua/) with its includes in place; `dir` another copy of lua/ (tools/lint-lua.js reads src/). */
export function composeLua(file: string, dir: string = LUA_DIR): ComposedLua {
  const into = { lines: [] as string[], origins: [] as { file: string; line: number }[] };
  compose(dir, file, '', [], into);
  return { text: `${into.lines.join('\n')}\n`, origins: into.origins };
}

/** A script as the Check connection sends it: its text and, for EVALSHA, the SHA-1 of it. */
export interface LoadedLua {
  readonly lua: string;
  readonly sha: string;
}

export function loadLua(file: string): LoadedLua {
  const lua = composeLua(file).text;
  return { lua, sha: createHash('sha1').update(lua).digest('hex') };
}
