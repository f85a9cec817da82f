# Vault policy for Airlock (broker + egress proxy + token issuer).
#
# Least privilege: read the secrets that back credential intents, keep its
# own token alive, and (only if tokens.keys.source is vault) read and
# update the one secret holding the token signing keys.
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

# Keep its own token alive.
path "auth/token/renew-self" {
  capabilities = ["update"]
}
path "auth/token/lookup-self" {
  capabilities = ["read"]
}
