//go:build tools

// Package tools pins the Vault server used by Airlock's integration tests.
// It is a test tool only: Vault >= 1.15 is BSL-licensed and never shipped.
package tools

import _ "github.com/hashicorp/vault"
