#!/usr/bin/env bash
# bootstrap.sh: prepare Vault for Airlock with AppRole auth. Idempotent.
#
# Run as a Vault admin (VAULT_ADDR and VAULT_TOKEN set). It
#   1. enables the AppRole auth method (if it is not enabled),
#   2. writes the "airlock" policy from airlock-policy.hcl,
#   3. creates or updates the "airlock" role bound to that policy,
#   4. writes the role id to $OUT_DIR/role-id and a response-wrapped
#      secret id to $OUT_DIR/secret-id (mode 0600), owned by $OWNER:
#      the user airlock serve runs as (default airlock-broker, the
#      shipped unit's user, when it exists; set OWNER=user[:group] for
#      another, or OWNER= to keep them yours). Giving a file to another
#      user needs root; the script refuses rather than leave files serve
#      cannot read.
# Configure Airlock with:
#   vault:
#     auth: {method: approle, role_id_file: OUT_DIR/role-id,
#            secret_id_file: OUT_DIR/secret-id, secret_id_wrapped: true}
# The wrapping token is single-use and expires after WRAP_TTL: start
# Airlock before then. Airlock unwraps it once and keeps the secret id in
# memory only.
set -euo pipefail

VAULT=${VAULT_CLI:-vault}
ROLE=${ROLE:-airlock}
POLICY=${POLICY:-airlock}
KV_MOUNT=${KV_MOUNT:-secret}
SECRETS_PREFIX=${SECRETS_PREFIX:-airlock}
APPROLE_PATH=${APPROLE_PATH:-approle}
TOKEN_TTL=${TOKEN_TTL:-1h}
TOKEN_MAX_TTL=${TOKEN_MAX_TTL:-24h}
SECRET_ID_TTL=${SECRET_ID_TTL:-0}
WRAP_TTL=${WRAP_TTL:-10m}
OUT_DIR=${OUT_DIR:-.}
OWNER=${OWNER-airlock-broker}
here=$(cd "$(dirname "$0")" && pwd)

: "${VAULT_ADDR:?set VAULT_ADDR}"
if [ -z "${VAULT_TOKEN:-}" ] && [ ! -f "$HOME/.vault-token" ]; then
	echo "bootstrap: set VAULT_TOKEN to an admin token" >&2
	exit 1
fi

# Read the list first: with pipefail, grep -q closing the pipe early can
# fail the pipeline with SIGPIPE and make an enabled mount look missing.
auth_mounts=$("$VAULT" auth list -format=json)
if ! grep -q "\"$APPROLE_PATH/\"" <<<"$auth_mounts"; then
	"$VAULT" auth enable -path="$APPROLE_PATH" approle >/dev/null
	echo "bootstrap: enabled AppRole at auth/$APPROLE_PATH" >&2
fi

sed -e "s#\"secret/#\"$KV_MOUNT/#g" \
	-e "s#sys/internal/ui/mounts/secret\"#sys/internal/ui/mounts/$KV_MOUNT\"#" \
	-e "s#/data/airlock/#/data/$SECRETS_PREFIX/#" \
	-e "s#/data/airlock-signing-keys#/data/$SECRETS_PREFIX-signing-keys#" \
	-e "s#/data/airlock-intercept-ca#/data/$SECRETS_PREFIX-intercept-ca#" \
	"$here/airlock-policy.hcl" | "$VAULT" policy write "$POLICY" - >/dev/null
echo "bootstrap: wrote policy $POLICY" >&2

"$VAULT" write "auth/$APPROLE_PATH/role/$ROLE" \
	token_policies="$POLICY" \
	token_ttl="$TOKEN_TTL" token_max_ttl="$TOKEN_MAX_TTL" \
	secret_id_ttl="$SECRET_ID_TTL" secret_id_num_uses=0 >/dev/null
echo "bootstrap: wrote role $ROLE (token ttl $TOKEN_TTL, max $TOKEN_MAX_TTL)" >&2

mkdir -p "$OUT_DIR"
umask 077
"$VAULT" read -field=role_id "auth/$APPROLE_PATH/role/$ROLE/role-id" >"$OUT_DIR/role-id"
"$VAULT" write -f -wrap-ttl="$WRAP_TTL" -field=wrapping_token \
	"auth/$APPROLE_PATH/role/$ROLE/secret-id" >"$OUT_DIR/secret-id"
chmod 600 "$OUT_DIR/role-id" "$OUT_DIR/secret-id"
if [ -n "$OWNER" ]; then
	owner_user=${OWNER%%:*}
	if [[ $owner_user =~ ^[0-9]+$ ]] || id -u "$owner_user" >/dev/null 2>&1; then
		if ! chown "$OWNER" "$OUT_DIR/role-id" "$OUT_DIR/secret-id"; then
			echo "bootstrap: cannot give role-id and secret-id to $OWNER: run as root, or set OWNER= and hand them over yourself" >&2
			exit 1
		fi
		echo "bootstrap: role-id and secret-id belong to $OWNER (mode 0600)" >&2
	else
		echo "bootstrap: no user $owner_user here: role-id and secret-id stay yours; give them to the user airlock serve runs as (chown) before it starts" >&2
	fi
fi
echo "bootstrap: role id in $OUT_DIR/role-id; wrapped secret id (valid $WRAP_TTL) in $OUT_DIR/secret-id" >&2
