package fleet

import "github.com/detour-proxy/detour/internal/fleet/resp"

// The scripts run atomically on the Redis server, so that two members
// deciding at once cannot both win: two cooldowns keep the later end, two
// trips keep one open period, K probe slots are K over the fleet, and the
// rpm bucket never hands out a token twice. Each takes its times from the
// caller (milliseconds or microseconds since the epoch) rather than from
// Redis's TIME, so that a member's virtual clock (the simulation) and
// Redis agree on what "now" is; TTLs are durations, which need no shared
// clock. Every key written has a TTL, so a member that dies leaks nothing.

// cooldownScript: KEYS[1] the upstream's cooldown key; ARGV until_ms,
// now_ms, the event (JSON, also the stored value), the channel. Sets and
// publishes unless a cooldown ending as late or later is stored. Returns 1
// when it set.
var cooldownScript = resp.NewScript(`
local cur = redis.call('GET', KEYS[1])
if cur then
  local ok, c = pcall(cjson.decode, cur)
  if ok and tonumber(c['until']) and tonumber(c['until']) >= tonumber(ARGV[1]) then return 0 end
end
local ttl = tonumber(ARGV[1]) - tonumber(ARGV[2])
if ttl <= 0 then return 0 end
redis.call('SET', KEYS[1], ARGV[3], 'PX', math.floor(ttl))
redis.call('PUBLISH', ARGV[4], ARGV[3])
return 1
`)

// breakerOpenScript: KEYS[1] the upstream's breaker key; ARGV until_ms,
// now_ms, the event, the channel. An open period already running in the
// fleet wins: its event is returned and the caller adopts it, so every
// member's half-open period starts at the same instant. Otherwise the new
// period is stored and published, and the script returns false (nil).
var breakerOpenScript = resp.NewScript(`
local cur = redis.call('GET', KEYS[1])
if cur then
  local ok, c = pcall(cjson.decode, cur)
  if ok and tonumber(c['until']) and tonumber(c['until']) > tonumber(ARGV[2]) then return cur end
end
local ttl = tonumber(ARGV[1]) - tonumber(ARGV[2])
if ttl <= 0 then return false end
redis.call('SET', KEYS[1], ARGV[3], 'PX', math.floor(ttl))
redis.call('PUBLISH', ARGV[4], ARGV[3])
return false
`)

// probeClaimScript: KEYS[1] the half-open period's claim counter; ARGV k,
// ttl_ms. A claim is a probe in flight or succeeded; a neutral probe gives
// its claim back (DECR). Returns 1 when a slot was granted.
var probeClaimScript = resp.NewScript(`
local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
if n > tonumber(ARGV[1]) then
  redis.call('DECR', KEYS[1])
  return 0
end
return 1
`)

// probeSuccessScript: KEYS[1] the period's success counter, KEYS[2] the
// breaker key; ARGV k, ttl_ms, the close event, the channel. The k-th
// success of the period closes the breaker fleet-wide.
var probeSuccessScript = resp.NewScript(`
local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
if n == tonumber(ARGV[1]) then
  redis.call('DEL', KEYS[2])
  redis.call('PUBLISH', ARGV[4], ARGV[3])
end
return n
`)

// rpmScript is GCRA (the generic cell rate algorithm) taking up to n
// tokens at once: KEYS[1] the upstream's theoretical arrival time (µs);
// ARGV rpm, burst, n, now_us. A full bucket holds burst tokens; one comes
// back every 60e6/rpm µs. Returns how many tokens were granted (0..n).
var rpmScript = resp.NewScript(`
local T = 60000000 / tonumber(ARGV[1])
local tau = tonumber(ARGV[2]) * T
local now = tonumber(ARGV[4])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0') or 0
if tat < now then tat = now end
local avail = math.floor((now + tau - tat) / T + 1e-9)
if avail <= 0 then return 0 end
local g = math.min(avail, tonumber(ARGV[3]))
tat = tat + g * T
redis.call('SET', KEYS[1], string.format('%.0f', tat), 'PX', math.floor((tat - now) / 1000) + 1000)
return g
`)

// slotScript: KEYS[1] the upstream's fleet concurrency set (members
// scored by when their hold expires); ARGV limit, now_ms, expires_ms, id.
// Holds past their expiry (a member that died holding them) are dropped
// first. Returns 1 when a slot was taken.
var slotScript = resp.NewScript(`
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[2])
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[1]) then return 0 end
redis.call('ZADD', KEYS[1], ARGV[3], ARGV[4])
redis.call('PEXPIRE', KEYS[1], math.floor(tonumber(ARGV[3]) - tonumber(ARGV[2])))
return 1
`)

// counterScript: KEYS[1] a shared counter; ARGV delta, ttl_ms. Adds, sets
// the TTL on the first add only (the period's end), returns the total.
var counterScript = resp.NewScript(`
local v = redis.call('INCRBYFLOAT', KEYS[1], ARGV[1])
if redis.call('PTTL', KEYS[1]) < 0 then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return v
`)
