-- luacheck (Debian's lua-check) for the store's Redis scripts, src/store/redis/lua/: `npm run lint:lua`
-- (tools/lint-lua.js) checks each script as Redis runs it, its includes in place. Redis runs them in Lua 5.1 with
-- these libraries and KEYS and ARGV as globals; a script may create no global of its own.
std = 'lua51'
read_globals = { 'redis', 'KEYS', 'ARGV', 'cjson', 'struct', 'cmsgpack', 'bit', 'unpack' }
-- As the TypeScript's printWidth.
max_line_length = 140
