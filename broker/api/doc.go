// Package api is the broker's gRPC transport: the server side ([Service],
// with [AuthOptions] and [TCPCredentials] for its listeners) and the Go
// client ([Client], from [Dial]) that a host or an operator's CLI in
// another process uses to reach `airlock serve`.
//
// Service serves two services of proto/airlock/broker/v1 over a
// *broker.Broker: BrokerService (issue and revoke handles and passes, mint
// Executa tokens, status, and the operator's inspect, revoke-by-
// fingerprint and explain) and LedgerService (budgets, violations, access
// grants and approvals, backed by the broker's store). Client implements
// broker.API, broker.InvocationEnder, broker.TokenMinter and
// broker.Ledger, so the host is written once for the broker in process
// and the broker over the socket.
//
// Errors cross the socket as a gRPC status whose message starts with the
// broker's reason code (broker.Reason); the client maps the reason back
// to the broker's sentinel (broker.ReasonError), so errors.Is works on
// both sides. An internal error is logged by the server and not described
// to the caller.
//
// # Security
//
// Every call, on every listener, presents the token of
// broker.api.token_file (AuthOptions): a peer admitted by uid on the unix
// socket, or by certificate on the TCP listener (mutual TLS 1.3), is not
// enough, since a plugin may share the host's uid. Refusals are logged
// with the method and the peer's uid and pid, never with what was
// presented. Requests larger than the largest legitimate one (128 KiB;
// IssueHandle's lists are counted on the wire before decoding) are
// refused, metadata is bounded (16 KiB), and at most 64 calls run at once
// with as many waiting: whoever reaches the API may mint handles, not
// exhaust the process.
//
// # Concurrency
//
// Service and Client are safe for concurrent use.
package api
