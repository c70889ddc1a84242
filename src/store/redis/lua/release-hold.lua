--@include lib/release-hold.lua
-- The hold of an answer that costs nothing (no usage record comes to release it), or of a Check that Redis answered
-- allowed after its deadline had failed it. KEYS: the account, the request's release marker; ARGV: the key's bucket
-- field, the hold as its Check placed it, the marker's time to live in ms.
release_hold(KEYS[1], ARGV[1], ARGV[2], KEYS[2], ARGV[3])
return 1
