//go:build linux

// Package testenv starts the real services Airlock's integration tests
// need — a Vault dev server and a redis-server — on free loopback ports.
//
// Binaries are found through VAULT_BIN / REDIS_SERVER_BIN, then PATH, then
// the tool cache that `make tools` fills. When one is missing the test
// skips with a message naming `make tools`, or fails when
// AIRLOCK_REQUIRE_SERVICES=1 (as `make test` sets), so a missing service
// can never pass silently in CI.
//
// Servers are started with Pdeathsig so they die with the test binary even
// if cleanup does not run; packages that share a Vault call [Main] from
// TestMain to stop it in order.
package testenv
