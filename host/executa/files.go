package executa

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/airlock-dev/airlock/host/executa/aps"
)

// filesCall handles files/* for a verified storage scope bucket: the
// protocol's params and answers around the host-wide files service.
func filesCall(f *aps.Files, method, bucket string, params json.RawMessage) (any, *RPCError) {
	var req struct {
		Path        string `json:"path"`
		ContentType string `json:"content_type"`
		SizeBytes   *int64 `json:"size_bytes"`
		ETag        string `json:"etag"`
		Prefix      string `json:"prefix"`
	}
	if err := json.Unmarshal(params, &req); err != nil {
		return nil, storageErr(CodeStorageInvalid, "params are not a files request", "INVALID_REQUEST")
	}
	switch method {
	case "files/upload_begin":
		// size_bytes is optional (the SDKs omit it when unknown): the PUT
		// is then bounded by the file limit. Zero is an empty file.
		size := int64(-1)
		if req.SizeBytes != nil {
			if size = *req.SizeBytes; size < 0 {
				return nil, storageErr(CodeStorageInvalid, "size_bytes: must not be negative", "INVALID_REQUEST")
			}
		}
		up, err := f.Begin(bucket, req.Path, req.ContentType, size)
		if err != nil {
			return nil, filesErr(err)
		}
		headers := map[string]string{}
		if req.ContentType != "" {
			headers["Content-Type"] = req.ContentType
		}
		// Every spelling a client reads: upload_url (the notes), put_url
		// and url (the SDKs), with the method and headers to send.
		return map[string]any{"upload_url": up.URL, "put_url": up.URL, "url": up.URL, "method": "PUT", "headers": headers,
			"upload_id": up.ID, "path": up.Path, "expires_at": up.ExpiresAt.UTC().Format(time.RFC3339)}, nil
	case "files/upload_complete":
		// The etag is optional (a client may not read the PUT's ETag);
		// when given it must match, quoted or weak forms included.
		file, err := f.Complete(bucket, req.Path, req.ETag)
		if err != nil {
			return nil, filesErr(err)
		}
		return map[string]any{"path": file.Path, "etag": file.ETag, "size": file.Size}, nil
	case "files/download_url":
		u, exp, err := f.DownloadURL(bucket, req.Path)
		if err != nil {
			return nil, filesErr(err)
		}
		return map[string]any{"download_url": u, "get_url": u, "url": u, "expires_at": exp.UTC().Format(time.RFC3339)}, nil
	case "files/delete":
		if err := f.Delete(bucket, req.Path); err != nil {
			return nil, filesErr(err)
		}
		return map[string]any{"deleted": true}, nil
	case "files/list":
		items := []map[string]any{}
		for _, file := range f.List(bucket, req.Prefix, MaxListLimit) {
			items = append(items, map[string]any{"path": file.Path, "size": file.Size, "etag": file.ETag})
		}
		return map[string]any{"items": items}, nil
	}
	return nil, &RPCError{Code: CodeMethodNotFound, Message: "method not found"}
}

// filesErr is the plugin's error for a files operation the service
// refused.
func filesErr(err error) *RPCError {
	switch {
	case errors.Is(err, aps.ErrInvalidPath):
		return storageErr(CodeStorageInvalidPath, "path: relative, clean, at most 512 bytes", "INVALID_PATH")
	case errors.Is(err, aps.ErrTooLarge):
		return storageErr(CodeStorageTooLarge, "size_bytes: larger than the file limit", "VALUE_TOO_LARGE")
	case errors.Is(err, aps.ErrQuota):
		return storageErr(CodeStorageQuota, "storage quota exceeded", "QUOTA_EXCEEDED")
	case errors.Is(err, aps.ErrPrecondition):
		return storageErr(CodeStoragePrecondition, "etag does not match the uploaded bytes", "PRECONDITION_FAILED")
	case errors.Is(err, aps.ErrNotFound):
		return storageErr(CodeStorageNotFound, "no such file", "NOT_FOUND")
	}
	return storageErr(CodeStorageUpstream, "store write failed", "UPSTREAM_ERROR")
}
