package executa

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"

	"github.com/airlock-dev/airlock/host/executa/aps"
	"github.com/airlock-dev/airlock/tokens"
)

// Storage (APS) error codes of the notes.
const (
	CodeStorageNotFound     = -32022
	CodeStoragePrecondition = -32023
	CodeStorageQuota        = -32024
	CodeStorageTooLarge     = -32025
	CodeStorageRateLimited  = -32026
	CodeStorageInvalidPath  = -32027
	CodeStorageInvalid      = -32028
)

// Storage limits.
const (
	MaxStorageValue     = 64 << 10
	MaxStorageKey       = 512
	MaxStorageRPCs      = 200
	DefaultListLimit    = 100
	MaxListLimit        = 1000
	DefaultStorageScope = "app"
)

func storageErr(code int, msg, name string) *RPCError { return rpcError(code, msg, name) }

// storage handles storage/* after the gate.
func (p *Process) storage(ctx context.Context, inv *liveInvoke, method string, params json.RawMessage) (any, *RPCError) {
	var req struct {
		Key          string          `json:"key"`
		Value        json.RawMessage `json:"value"`
		Scope        string          `json:"scope"`
		TTLSeconds   int64           `json:"ttl_seconds"`
		IfMatch      *string         `json:"if_match"`
		Prefix       string          `json:"prefix"`
		Cursor       string          `json:"cursor"`
		Limit        int             `json:"limit"`
		StorageToken string          `json:"storage_token"`
	}
	if err := json.Unmarshal(params, &req); err != nil {
		return nil, storageErr(CodeStorageInvalid, "params are not a storage request", "INVALID_REQUEST")
	}
	claims, msg := p.grant(ctx, inv, req.StorageToken, inv.storageToken, "storage", (*tokens.Verifier).VerifyStorage)
	if claims == nil {
		return nil, storageErr(CodeStorageNotGranted, msg, "STORAGE_NOT_GRANTED")
	}
	inv.budget.mu.Lock()
	inv.budget.storage++
	over := inv.budget.storage > MaxStorageRPCs
	inv.budget.mu.Unlock()
	if over {
		return nil, storageErr(CodeStorageRateLimited, "200 storage calls per invoke", "RATE_LIMITED")
	}
	bucket, rerr := scopeBucket(claims, req.Scope)
	if rerr != nil {
		return nil, rerr
	}
	if strings.HasPrefix(method, "files/") {
		if p.opts.Files == nil || p.opts.Files.KV == nil {
			return nil, storageErr(CodeStorageUpstream, "no files service is configured on this host", "UPSTREAM_ERROR")
		}
		return filesCall(p.opts.Files, method, bucket, params)
	}
	if p.opts.KV == nil {
		return nil, storageErr(CodeStorageUpstream, "no storage service is configured on this host", "UPSTREAM_ERROR")
	}
	if method != "storage/list" {
		if req.Key == "" || len(req.Key) > MaxStorageKey || strings.ContainsRune(req.Key, 0) {
			return nil, storageErr(CodeStorageInvalid, "key: 1 to 512 bytes, no NUL", "INVALID_REQUEST")
		}
	}
	s := p.opts.KV
	switch method {
	case "storage/get":
		v, ok := s.Get(bucket, req.Key)
		if !ok {
			return map[string]any{"value": nil, "exists": false, "etag": nil}, nil
		}
		return map[string]any{"value": v.Data, "exists": true, "etag": v.ETag}, nil
	case "storage/set":
		if len(req.Value) == 0 {
			return nil, storageErr(CodeStorageInvalid, "value: required", "INVALID_REQUEST")
		}
		if len(req.Value) > MaxStorageValue {
			return nil, storageErr(CodeStorageTooLarge, "value larger than 64 KB", "VALUE_TOO_LARGE")
		}
		if req.TTLSeconds < 0 {
			return nil, storageErr(CodeStorageInvalid, "ttl_seconds: not negative", "INVALID_REQUEST")
		}
		etag, err := s.Set(bucket, req.Key, req.Value, req.TTLSeconds, req.IfMatch)
		if err != nil {
			return nil, storeErr(err)
		}
		return map[string]any{"etag": etag}, nil
	case "storage/delete":
		deleted, err := s.Delete(bucket, req.Key)
		if err != nil {
			return nil, storeErr(err)
		}
		return map[string]any{"deleted": deleted}, nil
	case "storage/list":
		limit := req.Limit
		if limit <= 0 {
			limit = DefaultListLimit
		}
		limit = min(limit, MaxListLimit)
		after := ""
		if req.Cursor != "" {
			c, err := base64.RawURLEncoding.DecodeString(req.Cursor)
			if err != nil {
				return nil, storageErr(CodeStorageInvalid, "cursor: not one this service issued", "INVALID_REQUEST")
			}
			after = string(c)
		}
		found, more := s.List(bucket, req.Prefix, after, limit)
		items := make([]map[string]string, len(found))
		for i, it := range found {
			items[i] = map[string]string{"key": it.Key, "etag": it.ETag}
		}
		out := map[string]any{"items": items}
		if more && len(found) > 0 {
			out["next_cursor"] = base64.RawURLEncoding.EncodeToString([]byte(found[len(found)-1].Key))
		}
		return out, nil
	}
	return nil, &RPCError{Code: CodeMethodNotFound, Message: "method not found"}
}

// storeErr is the plugin's error for a failed store operation: the
// store's own refusals by their codes, anything else a failed write.
func storeErr(err error) *RPCError {
	switch {
	case errors.Is(err, aps.ErrPrecondition):
		return storageErr(CodeStoragePrecondition, "if_match does not match the current etag", "PRECONDITION_FAILED")
	case errors.Is(err, aps.ErrQuota):
		return storageErr(CodeStorageQuota, "storage quota exceeded", "QUOTA_EXCEEDED")
	}
	return storageErr(CodeStorageUpstream, "store write failed", "UPSTREAM_ERROR")
}

// scopeBucket resolves a scope against the token: user and tool are the
// platform constant; app needs the host-attested app claims.
func scopeBucket(c *tokens.Claims, scope string) (string, *RPCError) {
	if scope == "" {
		scope = DefaultStorageScope
	}
	if !c.HasScope(scope) {
		// The scope asked for is the plugin's: named only when it is one
		// the platform knows; the granted ones name the fix.
		asked := "the scope asked for"
		if scope == tokens.ScopeUser || scope == tokens.ScopeTool || scope == tokens.ScopeApp {
			asked = "scope " + scope
		}
		return "", storageErr(CodeStorageNotGranted, asked+" is not granted by the storage token; it grants: "+strings.Join(c.Scopes, ", "),
			"STORAGE_NOT_GRANTED")
	}
	switch scope {
	case tokens.ScopeUser:
		return "user/" + c.UserID, nil
	case tokens.ScopeTool:
		plugin, _, _ := strings.Cut(c.ExecutaToolID, "/")
		return "tool/" + plugin, nil
	case tokens.ScopeApp:
		return "app/" + c.AppID, nil
	}
	return "", storageErr(CodeStorageInvalid, "scope: user, app or tool", "INVALID_REQUEST")
}
