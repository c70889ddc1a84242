--@include lib/outbox.lua
-- Events that no stored change causes (a test-send).
append_events(KEYS[1], KEYS[2], ARGV[1])
