package broker

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// The ledger's layout in Redis, under KeyPrefix:
//
//	sp:<budget key>   hash {calls, cost_micros, egress_requests, egress_bytes, tokens};
//	                  expires invocationSpendTTL (invocation keys) or spendKeyTTL after the last charge
//	vi:inv:<id>       list of violation JSON, oldest first, the last MaxViolationsPerKey
//	vi:plg:<id>       sorted set of "<nonce> <violation JSON>" by unix ms, the last MaxViolationsPerKey
//	ag:<id>           hash {g: access grant JSON, ra: revoked at (RFC 3339), rb: revoked by};
//	                  expires at not_after + ledgerRetention
//	ag-index          sorted set of access grant ids by not_after (unix ms)
//	ap:<id>           approval JSON; expires at expires_at + ledgerRetention
//	ap-index          sorted set of approval ids by expires_at (unix ms)
//
// A charge is one Lua script over every line's key, so replicas charging
// at once never count past a limit. A grant's revocation is written apart
// from its record (ra, rb), so writing the record again cannot undo it,
// and with the durability of a handle revocation (WAIT, journal). An
// approval's decision is a WATCH/MULTI transaction.

// chargeScript checks every line, then counts in every line or none. Its
// dimension list is spendDims, so the two cannot disagree.
var chargeScript = redis.NewScript(`
local dims = {` + luaDims() + `}
local n = #dims
local zero = ARGV[n+1] == '1'
for i, k in ipairs(KEYS) do
  local base = n + 1 + (i-1)*(n+1)
  local cur = redis.call('HMGET', k, unpack(dims))
  for d = 1, n do
    local lim = tonumber(ARGV[base+d])
    if lim > 0 then
      local c = tonumber(cur[d] or '0')
      local a = tonumber(ARGV[d])
      if (zero and c >= lim) or (a > 0 and c + a > lim) then return {i, d, lim, c} end
    end
  end
end
if zero then return {0} end
for i, k in ipairs(KEYS) do
  local base = n + 1 + (i-1)*(n+1)
  for d = 1, n do
    local a = tonumber(ARGV[d])
    if a > 0 then redis.call('HINCRBY', k, dims[d], a) end
  end
  redis.call('PEXPIRE', k, ARGV[base+n+1])
end
return {0}
`)

func luaDims() string {
	q := make([]string, len(spendDims))
	for i, d := range spendDims {
		q[i] = "'" + d.name + "'"
	}
	return strings.Join(q, ", ")
}

func (s *RedisStore) spendKey(key string) string { return s.prefix + "sp:" + key }

// Charge implements Ledger.
func (s *RedisStore) Charge(ctx context.Context, lines []BudgetLine, add Spend) error {
	if err := checkCharge(lines, add); err != nil {
		return err
	}
	if len(lines) == 0 {
		return nil
	}
	keys := make([]string, len(lines))
	args := make([]any, 0, (len(lines)+1)*(len(spendDims)+1))
	for _, v := range add.vector() {
		args = append(args, v)
	}
	zero := "0"
	if add.IsZero() {
		zero = "1"
	}
	args = append(args, zero)
	for i, l := range lines {
		keys[i] = s.spendKey(l.Key)
		for _, v := range l.Limits.vector() {
			args = append(args, v)
		}
		args = append(args, spendTTL(l.Key).Milliseconds())
	}
	res, err := chargeScript.Run(ctx, s.rdb, keys, args...).Int64Slice()
	if err != nil {
		return fmt.Errorf("%w: charge: %v", ErrStoreUnavailable, err)
	}
	if len(res) == 4 && res[0] >= 1 && int(res[0]) <= len(lines) && res[1] >= 1 && int(res[1]) <= len(spendDims) {
		return &BudgetExhaustedError{Key: lines[res[0]-1].Key, Dimension: spendDims[res[1]-1].name, Limit: res[2], Spent: res[3]}
	}
	return nil
}

// Spent implements Ledger.
func (s *RedisStore) Spent(ctx context.Context, key string) (Spend, error) {
	names := make([]string, len(spendDims))
	for i, d := range spendDims {
		names[i] = d.name
	}
	vals, err := s.rdb.HMGet(ctx, s.spendKey(key), names...).Result()
	if err != nil {
		return Spend{}, fmt.Errorf("%w: spent: %v", ErrStoreUnavailable, err)
	}
	v := make([]int64, len(vals))
	for i, x := range vals {
		if str, ok := x.(string); ok {
			v[i], _ = strconv.ParseInt(str, 10, 64)
		}
	}
	return spendOf(v), nil
}

// RecordViolation implements Ledger.
func (s *RedisStore) RecordViolation(ctx context.Context, v Violation) error {
	if v.At.IsZero() {
		v.At = time.Now()
	}
	body, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode violation: %w", err)
	}
	inv, plg := s.key("vi:inv:", v.InvocationID), s.key("vi:plg:", v.PluginID)
	_, err = s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.RPush(ctx, inv, body)
		p.LTrim(ctx, inv, -MaxViolationsPerKey, -1)
		p.PExpire(ctx, inv, ledgerRetention)
		// The nonce keeps two equal violations in one millisecond apart.
		p.ZAdd(ctx, plg, redis.Z{Score: float64(v.At.UnixMilli()), Member: rand.Text()[:12] + " " + string(body)})
		p.ZRemRangeByRank(ctx, plg, 0, -MaxViolationsPerKey-1)
		p.PExpire(ctx, plg, ledgerRetention)
		return nil
	})
	if err != nil {
		return fmt.Errorf("%w: record violation: %v", ErrStoreUnavailable, err)
	}
	return nil
}

// Violations implements Ledger.
func (s *RedisStore) Violations(ctx context.Context, invocationID string) ([]Violation, error) {
	raw, err := s.rdb.LRange(ctx, s.key("vi:inv:", invocationID), 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("%w: violations: %v", ErrStoreUnavailable, err)
	}
	out := make([]Violation, 0, len(raw))
	for _, r := range raw {
		var v Violation
		if json.Unmarshal([]byte(r), &v) == nil {
			out = append(out, v)
		}
	}
	return out, nil
}

// PluginViolations implements Ledger.
func (s *RedisStore) PluginViolations(ctx context.Context, pluginID string, since time.Time) ([]Violation, error) {
	raw, err := s.rdb.ZRangeArgs(ctx, redis.ZRangeArgs{Key: s.key("vi:plg:", pluginID), ByScore: true,
		Start: strconv.FormatInt(since.UnixMilli(), 10), Stop: "+inf"}).Result()
	if err != nil {
		return nil, fmt.Errorf("%w: violations: %v", ErrStoreUnavailable, err)
	}
	var out []Violation
	for _, r := range raw {
		_, body, _ := strings.Cut(r, " ")
		var v Violation
		if json.Unmarshal([]byte(body), &v) == nil && !v.At.Before(since) {
			out = append(out, v)
		}
	}
	return out, nil
}

func (s *RedisStore) grantKey(id string) string { return s.prefix + "ag:" + id }

// PutAccessGrant implements Ledger. Writing a grant again keeps its
// revocation.
func (s *RedisStore) PutAccessGrant(ctx context.Context, g *AccessGrant) error {
	if err := checkAccessGrant(g); err != nil {
		return err
	}
	rec := *g
	rec.RevokedAt, rec.RevokedBy = time.Time{}, ""
	body, err := json.Marshal(&rec)
	if err != nil {
		return fmt.Errorf("encode access grant: %w", err)
	}
	k := s.grantKey(g.ID)
	_, err = s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, k, "g", body)
		p.PExpireAt(ctx, k, g.NotAfter.Add(ledgerRetention))
		p.ZAdd(ctx, s.key("ag-index"), redis.Z{Score: float64(g.NotAfter.UnixMilli()), Member: g.ID})
		return nil
	})
	if err != nil {
		return fmt.Errorf("%w: put access grant: %v", ErrStoreUnavailable, err)
	}
	return nil
}

// GetAccessGrant implements Ledger.
func (s *RedisStore) GetAccessGrant(ctx context.Context, id string) (*AccessGrant, error) {
	vals, err := s.rdb.HMGet(ctx, s.grantKey(id), "g", "ra", "rb").Result()
	if err != nil {
		return nil, fmt.Errorf("%w: get access grant: %v", ErrStoreUnavailable, err)
	}
	return grantOf(vals)
}

func grantOf(vals []any) (*AccessGrant, error) {
	body, ok := vals[0].(string)
	if !ok {
		return nil, ErrGrantUnknown
	}
	g := &AccessGrant{}
	if err := json.Unmarshal([]byte(body), g); err != nil {
		return nil, fmt.Errorf("%w: stored access grant is corrupt", ErrStoreUnavailable)
	}
	if ra, ok := vals[1].(string); ok {
		g.RevokedAt, _ = time.Parse(time.RFC3339Nano, ra)
		g.RevokedBy, _ = vals[2].(string)
	}
	return g, nil
}

// ListAccessGrants implements Ledger.
func (s *RedisStore) ListAccessGrants(ctx context.Context) ([]*AccessGrant, error) {
	ids, err := s.indexed(ctx, "ag-index")
	if err != nil {
		return nil, err
	}
	cmds, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, id := range ids {
			p.HMGet(ctx, s.grantKey(id), "g", "ra", "rb")
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%w: list access grants: %v", ErrStoreUnavailable, err)
	}
	var out []*AccessGrant
	for _, c := range cmds {
		if g, err := grantOf(c.(*redis.SliceCmd).Val()); err == nil {
			out = append(out, g)
		}
	}
	sortGrants(out)
	return out, nil
}

// indexed returns the ids in an index, dropping those past retention.
func (s *RedisStore) indexed(ctx context.Context, index string) ([]string, error) {
	k := s.key(index)
	old := strconv.FormatInt(time.Now().Add(-ledgerRetention).UnixMilli(), 10)
	if err := s.rdb.ZRemRangeByScore(ctx, k, "-inf", "("+old).Err(); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrStoreUnavailable, index, err)
	}
	ids, err := s.rdb.ZRange(ctx, k, 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrStoreUnavailable, index, err)
	}
	return ids, nil
}

// revokeAccessGrantScript answers 0 (no such grant), 1 (revoked
// already) or 2 (revoked now): revoke keeps the highest answer of its
// attempts, so a retry after an unconfirmed first write still reports
// that the grant was live.
var revokeAccessGrantScript = redis.NewScript(`
if redis.call('HEXISTS', KEYS[1], 'g') == 0 then return 0 end
if redis.call('HEXISTS', KEYS[1], 'ra') == 1 then return 1 end
redis.call('HSET', KEYS[1], 'ra', ARGV[1], 'rb', ARGV[2])
return 2
`)

// RevokeAccessGrant implements Ledger, as durably as a handle revocation:
// acknowledged only once replicas hold it (ErrRevocationUnreplicated
// otherwise: it is enforced on the primary, and journaled to be written
// again after a primary change until the grant's end).
func (s *RedisStore) RevokeAccessGrant(ctx context.Context, id, by string, at time.Time) (bool, error) {
	until := time.Now().Add(MaxAccessGrantTTL)
	if g, err := s.GetAccessGrant(ctx, id); err == nil {
		until = g.NotAfter
	}
	n, err := s.revokeUntil(ctx, until, revokeAccessGrantScript, []string{s.grantKey(id)},
		at.UTC().Format(time.RFC3339Nano), by)
	if n == 0 && err == nil {
		return false, ErrGrantUnknown
	}
	return n == 2, err
}

func (s *RedisStore) approvalKey(id string) string { return s.prefix + "ap:" + id }

// PutApproval implements Ledger: it stores a (replacing the record with
// its id).
func (s *RedisStore) PutApproval(ctx context.Context, a *Approval) error {
	if err := checkApproval(a); err != nil {
		return err
	}
	body, err := json.Marshal(a)
	if err != nil {
		return fmt.Errorf("encode approval: %w", err)
	}
	_, err = s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, s.approvalKey(a.ID), body, 0)
		p.PExpireAt(ctx, s.approvalKey(a.ID), a.ExpiresAt.Add(ledgerRetention))
		p.ZAdd(ctx, s.key("ap-index"), redis.Z{Score: float64(a.ExpiresAt.UnixMilli()), Member: a.ID})
		return nil
	})
	if err != nil {
		return fmt.Errorf("%w: put approval: %v", ErrStoreUnavailable, err)
	}
	return nil
}

// GetApproval implements Ledger.
func (s *RedisStore) GetApproval(ctx context.Context, id string) (*Approval, error) {
	b, err := s.rdb.Get(ctx, s.approvalKey(id)).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, ErrApprovalUnknown
	}
	if err != nil {
		return nil, fmt.Errorf("%w: get approval: %v", ErrStoreUnavailable, err)
	}
	a, err := approvalOf(b)
	if err != nil {
		return nil, err
	}
	return a.settle(time.Now()), nil
}

func approvalOf(b []byte) (*Approval, error) {
	a := &Approval{}
	if err := json.Unmarshal(b, a); err != nil {
		return nil, fmt.Errorf("%w: stored approval is corrupt", ErrStoreUnavailable)
	}
	return a, nil
}

// ListApprovals implements Ledger.
func (s *RedisStore) ListApprovals(ctx context.Context) ([]*Approval, error) {
	ids, err := s.indexed(ctx, "ap-index")
	if err != nil || len(ids) == 0 {
		return nil, err
	}
	keys := make([]string, len(ids))
	for i, id := range ids {
		keys[i] = s.approvalKey(id)
	}
	vals, err := s.rdb.MGet(ctx, keys...).Result()
	if err != nil {
		return nil, fmt.Errorf("%w: list approvals: %v", ErrStoreUnavailable, err)
	}
	now := time.Now()
	var out []*Approval
	for _, v := range vals {
		if str, ok := v.(string); ok {
			if a, err := approvalOf([]byte(str)); err == nil {
				out = append(out, a.settle(now))
			}
		}
	}
	sortApprovals(out)
	return out, nil
}

// maxDecideAttempts bounds the optimistic transaction's retries when
// other deciders keep changing the approval under it.
const maxDecideAttempts = 64

// DecideApproval implements Ledger: WATCH the record, decide, and write
// it only if nobody else did meanwhile (else try again).
func (s *RedisStore) DecideApproval(ctx context.Context, id, approver string, approve bool, at time.Time) (*Approval, error) {
	k := s.approvalKey(id)
	var out *Approval
	decide := func(tx *redis.Tx) error {
		b, err := tx.Get(ctx, k).Bytes()
		if errors.Is(err, redis.Nil) {
			return ErrApprovalUnknown
		}
		if err != nil {
			return fmt.Errorf("%w: decide approval: %v", ErrStoreUnavailable, err)
		}
		a, err := approvalOf(b)
		if err != nil {
			return err
		}
		if err := a.decide(approver, approve, at); err != nil {
			return err
		}
		body, err := json.Marshal(a)
		if err != nil {
			return fmt.Errorf("encode approval: %w", err)
		}
		_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.SetArgs(ctx, k, body, redis.SetArgs{KeepTTL: true})
			return nil
		})
		out = a
		return err
	}
	for range maxDecideAttempts {
		err := s.rdb.Watch(ctx, decide, k)
		if errors.Is(err, redis.TxFailedErr) {
			continue
		}
		if err != nil && !isLedgerError(err) {
			return nil, fmt.Errorf("%w: decide approval: %v", ErrStoreUnavailable, err)
		}
		if err != nil {
			return nil, err
		}
		return out, nil
	}
	return nil, fmt.Errorf("%w: decide approval: too much contention", ErrStoreUnavailable)
}

// isLedgerError: err is one of the ledger's own answers, not the store's
// failure.
func isLedgerError(err error) bool {
	for _, e := range []error{ErrApprovalUnknown, ErrApprovalDecided, ErrApprovalExpired, ErrSelfApproval,
		ErrNotEligible, ErrAlreadyApproved, ErrBadRequest, ErrStoreUnavailable} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
