package broker

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/redis/go-redis/v9"
)

// Rate is one limit of a global check: GCRA with an emission interval of
// 1/RPS and a burst.
type Rate struct {
	Key   string // what is limited, e.g. "h:<fingerprint>" or "p:<plugin>"
	RPS   float64
	Burst int
}

// rateScript is GCRA over every key at once, on Redis' own clock (the
// replicas' clocks do not matter): the request is admitted only when every
// key admits it, and only then are their theoretical arrival times moved.
// It returns {1, 0, 0} when admitted, else {0, wait µs, index of the key
// that refused (1-based)}.
var rateScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local news = {}
for i, key in ipairs(KEYS) do
  local interval = tonumber(ARGV[2*i-1])
  local tau = tonumber(ARGV[2*i])
  local tat = tonumber(redis.call('GET', key) or now)
  if tat < now then tat = now end
  local nxt = tat + interval
  if nxt - now > tau then return {0, math.floor(nxt - now - tau), i} end
  news[i] = nxt
end
for i, key in ipairs(KEYS) do
  redis.call('SET', key, string.format('%.0f', news[i]), 'PX', math.ceil((news[i] - now) / 1000) + 1000)
end
return {1, 0, 0}
`)

// AllowRates admits one request against every rate across all replicas
// sharing this Redis. It answers which rate refused (its index) and when
// to retry; an error means Redis could not decide (the caller fails
// closed).
func (s *RedisStore) AllowRates(ctx context.Context, rates ...Rate) (ok bool, refused int, retry time.Duration, err error) {
	keys := make([]string, len(rates))
	args := make([]any, 0, 2*len(rates))
	for i, r := range rates {
		keys[i] = s.key("rl:", r.Key)
		interval := 1e6 / math.Max(r.RPS, 1e-9)
		args = append(args, interval, interval*float64(max(r.Burst, 1)))
	}
	res, err := rateScript.Run(ctx, s.rdb, keys, args...).Int64Slice()
	if err != nil || len(res) != 3 {
		return false, 0, 0, fmt.Errorf("%w: rate limits: %v", ErrStoreUnavailable, err)
	}
	if res[0] == 1 {
		return true, -1, 0, nil
	}
	return false, int(res[2]) - 1, time.Duration(res[1]) * time.Microsecond, nil
}
