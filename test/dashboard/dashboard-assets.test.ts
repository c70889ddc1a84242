import js from '@eslint/js';
import { Linter } from 'eslint';
import globals from 'globals';

import { DASHBOARD_HTML } from '../../src/admin/dashboard/dashboard-page';
import { DASHBOARD_SCRIPT } from '../../src/admin/dashboard/dashboard-script';
import { DASHBOARD_CSS } from '../../src/admin/dashboard/dashboard-style';

/** Static checks of the dashboard assets; the browser suite (dashboard.test.ts) checks the behaviour. */
describe('dashboard assets', () => {
  it('the script is valid browser JavaScript that passes the recommended ESLint rules', () => {
    // The script is a string in a .ts file, so `eslint .` does not see it: lint it here (a parse error is a message too).
    const linter = new Linter({ configType: 'flat' });
    const config: Linter.Config[] = [
      js.configs.recommended,
      { languageOptions: { ecmaVersion: 2022, sourceType: 'script', globals: globals.browser } },
    ];
    const problems = linter.verify(DASHBOARD_SCRIPT, config).map((m) => `${m.line}:${m.column} ${m.ruleId ?? 'parse'}: ${m.message}`);
    expect(problems).toEqual([]);
  });

  it('the script never builds HTML from strings', () => {
    for (const sink of ['innerHTML', 'outerHTML', 'insertAdjacentHTML', 'document.write', 'eval(', 'new Function', "setTimeout('"]) {
      expect(DASHBOARD_SCRIPT).not.toContain(sink);
    }
  });

  it('the script keeps the token in sessionStorage only', () => {
    expect(DASHBOARD_SCRIPT).toContain('sessionStorage');
    expect(DASHBOARD_SCRIPT).not.toContain('localStorage');
    expect(DASHBOARD_SCRIPT).not.toMatch(/document\.cookie/);
  });

  it('the page has no inline script, inline style, event-handler attribute or external resource', () => {
    expect(DASHBOARD_HTML).not.toMatch(/<script>|<script(?![^>]*\bsrc="\/dashboard\/app\.js")/);
    expect(DASHBOARD_HTML).not.toMatch(/<style|\sstyle=|\son[a-z]+=/i);
    expect(DASHBOARD_HTML).not.toMatch(/(src|href)="(https?:)?\/\//);
    expect(DASHBOARD_CSS).not.toMatch(/url\(|@import/);
  });
});
