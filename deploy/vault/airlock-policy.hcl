# Vault policy for Airlock (broker + egress proxy + token issuer).
#
# Least privilege: read the secrets that back credential intents, keep its
# own token alive, and (only if tokens.keys.source is vault, or
# proxy.intercept.vault is set) read and update the one secret holding the
# token signing keys, or the intercept CA.
#
# bootstrap.sh rewrites the mount ("secret") and prefix ("airlock") when
# KV_MOUNT / SECRETS_PREFIX say otherwise.

# Secrets bound to intents: KV v2 data, read-only.
path "secret/data/airlock/*" {
  capabilities = ["read"]
}

# Lets Airlock check that a mount is the KV version its config says
# (the same lookup the vault CLI makes); no secret is readable through it.
path "sys/internal/ui/mounts/secret" {
  capabilities = ["read"]
}

# Token signing keys shared by replicas. Remove if tokens.keys.source is
# not vault.
path "secret/data/airlock-signing-keys" {
  capabilities = ["create", "read", "update"]
}

# The CONNECT intercept CA shared by replicas (its private key). Remove if
# proxy.intercept.vault is not set.
path "secret/data/airlock-intercept-ca" {
  capabilities = ["create", "read", "update"]
}

# Keep its own token alive.
path "auth/token/renew-self" {
  capabilities = ["update"]
}
path "auth/token/lookup-self" {
  capabilities = ["read"]
}

# Leased secrets (intents with source vault_lease): renew and revoke the
# leases Airlock obtained (it knows their ids; nothing else is reachable
# through these), plus each engine path an intent names, for example:
#   path "rabbitmq/creds/airlock-plugin" { capabilities = ["read"] }
#   path "pki/issue/airlock-client"      { capabilities = ["update"] }
# Remove the two below if no intent is leased.
path "sys/leases/renew" {
  capabilities = ["update"]
}
path "sys/leases/revoke" {
  capabilities = ["update"]
}
