--@include lib/release-hold.lua
-- The hold of an answer that costs nothing (no usage record comes to release it).
release_hold(KEYS[1], KEYS[2], ARGV[1])
return 1
