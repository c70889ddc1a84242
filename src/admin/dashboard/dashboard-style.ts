/** The dashboard's stylesheet, served at /dashboard/app.css (CSP: style-src 'self', so no inline styles anywhere). */
export const DASHBOARD_CSS = `:root {
  --fg: #1d2330;
  --muted: #5b6478;
  --line: #dde2ea;
  --bg: #f5f7fa;
  --card: #ffffff;
  --accent: #2f5bd3;
  --accent-dark: #2349b0;
  --danger: #b42318;
  --ok-bg: #e6f4ea; --ok-fg: #1e6b34;
  --off-bg: #eef0f3; --off-fg: #4a5263;
  --warn-bg: #fff4d6; --warn-fg: #7a4d00;
  font-family: system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif;
  font-size: 15px;
  color: var(--fg);
  background: var(--bg);
}
* { box-sizing: border-box; }
body { margin: 0; }
[hidden] { display: none !important; }
code, .mono { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, "Liberation Mono", monospace; font-size: 0.92em; }
.topbar {
  display: flex; align-items: center; justify-content: space-between;
  padding: 10px 24px; background: #1d2330; color: #fff;
}
.brand { font-weight: 600; letter-spacing: 0.2px; }
.brand-sub { font-weight: 400; opacity: 0.7; }
main { max-width: 1240px; margin: 0 auto; padding: 20px 24px 48px; }
h1 { font-size: 1.6rem; margin: 8px 0 8px; }
h2 { font-size: 1.15rem; margin: 0 0 10px; }
p { line-height: 1.45; }
.muted { color: var(--muted); }
.card { background: var(--card); border: 1px solid var(--line); border-radius: 8px; padding: 18px 20px; margin: 18px 0; }
.card.narrow { max-width: 520px; }
.hint { background: #eef3ff; border-left: 4px solid var(--accent); padding: 10px 14px; border-radius: 4px; margin: 8px 0 16px; }
label { font-weight: 600; }
input, select {
  font: inherit; padding: 7px 10px; border: 1px solid #b9c1cf; border-radius: 6px; background: #fff; color: var(--fg);
}
input:focus, select:focus, button:focus { outline: 2px solid var(--accent); outline-offset: 1px; }
button {
  font: inherit; cursor: pointer; padding: 7px 14px; border-radius: 6px;
  border: 1px solid var(--accent); background: var(--accent); color: #fff;
}
button:hover { background: var(--accent-dark); }
button:disabled { opacity: 0.55; cursor: progress; }
button.secondary { background: #fff; color: var(--fg); border-color: #b9c1cf; }
button.secondary:hover { background: #f0f2f6; }
.topbar button.secondary { background: transparent; color: #fff; border-color: rgba(255,255,255,0.5); }
.topbar button.secondary:hover { background: rgba(255,255,255,0.12); }
button.danger, button.danger-outline:hover { background: var(--danger); border-color: var(--danger); color: #fff; }
button.danger-outline { background: #fff; color: var(--danger); border-color: #e3b4af; }
button.small { padding: 4px 10px; font-size: 0.88rem; }
#sign-in-form { display: flex; flex-direction: column; gap: 8px; align-items: flex-start; }
#sign-in-form input { width: 100%; }
.alert:empty, .notice:empty { display: none; }
.alert {
  background: #fdecea; color: #7a1a12; border: 1px solid #f3b8b1; border-radius: 6px;
  padding: 10px 14px; margin: 0 0 14px; white-space: pre-wrap; overflow-wrap: anywhere;
}
.alert .detail { color: #9b3b31; font-size: 0.9em; }
.notice { background: var(--ok-bg); color: var(--ok-fg); border: 1px solid #b5dcc0; border-radius: 6px; padding: 8px 14px; margin: 0 0 14px; }
.toolbar { display: flex; align-items: center; gap: 10px; flex-wrap: wrap; }
.toolbar select { min-width: 280px; }
.table-wrap { overflow-x: auto; background: var(--card); border: 1px solid var(--line); border-radius: 8px; }
table { border-collapse: collapse; width: 100%; }
caption { text-align: left; padding: 12px 14px 6px; font-weight: 600; }
th, td { text-align: left; padding: 9px 12px; border-top: 1px solid var(--line); vertical-align: top; }
thead th { font-size: 0.82rem; text-transform: uppercase; letter-spacing: 0.04em; color: var(--muted); background: #fafbfc; }
tbody tr:hover { background: #fafbfd; }
td.name { min-width: 120px; max-width: 260px; overflow-wrap: break-word; }
td.status { min-width: 150px; }
thead th { white-space: nowrap; }
td.prefix { white-space: nowrap; }
td.actions-cell { white-space: nowrap; text-align: right; }
td.actions-cell button + button { margin-left: 6px; }
.note { display: block; font-size: 0.84em; color: var(--muted); margin-top: 3px; }
.badge { display: inline-block; padding: 1px 9px; border-radius: 999px; font-size: 0.84em; font-weight: 600; }
.badge.status-active { background: var(--ok-bg); color: var(--ok-fg); }
.badge.status-revoked { background: var(--off-bg); color: var(--off-fg); }
.badge.status-expired { background: var(--warn-bg); color: var(--warn-fg); }
.badge.env-live { background: #e8eefc; color: #23408f; }
.badge.env-test { background: #f3e8fc; color: #5b2a86; }
.new-key { background: #fffdf3; border: 2px solid #e8c34a; border-radius: 8px; padding: 16px 20px; margin: 16px 0; }
.warning { color: var(--warn-fg); font-weight: 700; margin: 6px 0 10px; }
.key-box { background: #1d2330; color: #f5f7fa; border-radius: 6px; padding: 12px 14px; overflow-wrap: anywhere; }
.key-box code { font-size: 1.02rem; user-select: all; }
.actions { display: flex; align-items: center; gap: 10px; margin-top: 12px; flex-wrap: wrap; }
.create-form { display: flex; align-items: flex-end; gap: 14px; flex-wrap: wrap; }
.field { display: flex; flex-direction: column; gap: 5px; }
.field input { min-width: 280px; }
dialog { border: 1px solid var(--line); border-radius: 10px; padding: 20px 24px; max-width: 560px; width: calc(100% - 32px); color: var(--fg); }
dialog::backdrop { background: rgba(20, 26, 38, 0.45); }
fieldset { border: 1px solid var(--line); border-radius: 6px; padding: 10px 14px; margin: 0 0 8px; }
legend { font-weight: 600; padding: 0 4px; }
.choice { display: flex; align-items: center; gap: 8px; padding: 4px 0; }
.choice label { font-weight: 400; }
.visually-hidden { position: absolute; width: 1px; height: 1px; padding: 0; margin: -1px; overflow: hidden; clip: rect(0 0 0 0); white-space: nowrap; border: 0; }
`;
