package config

// pathKind is what a string field of the config is to the sandbox.
type pathKind int

const (
	// notPath: not a path on this machine (a name, an address, a URL,
	// a Vault path, a secret).
	notPath pathKind = iota
	// hidePath: a file or directory of Airlock's own, hidden.
	hidePath
	// hideDir: a unix socket; its directory is hidden.
	hideDir
	// hideUnixDir: unix:/path (its directory is hidden) or host:port.
	hideUnixDir
	// shown: a path the plugin is meant to see (an operator's grant, an
	// Executa plugin's program and its arguments).
	shown
)

// pathFields classifies every string field of Config, by its key (see
// walkStrings). The one registry of Airlock's paths: Hidden reads it,
// and TestEveryConfigStringIsClassified fails on a field it lacks.
var pathFields = map[string]pathKind{
	"version":   notPath,
	"state_dir": hidePath,
	"~Path":     hidePath, // the config file itself

	"log.format":   notPath,
	"log.level":    notPath,
	"admin.listen": notPath,

	"tracing.endpoint": notPath, // a URL

	"vault.address":                         notPath,
	"vault.namespace":                       notPath,
	"vault.ca_file":                         hidePath,
	"vault.tls_server_name":                 notPath,
	"vault.auth.method":                     notPath,
	"vault.auth.mount_path":                 notPath, // a Vault mount
	"vault.auth.token_file":                 hidePath,
	"vault.auth.role_id":                    notPath,
	"vault.auth.role_id_file":               hidePath,
	"vault.auth.secret_id_file":             hidePath,
	"vault.auth.role":                       notPath,
	"vault.auth.service_account_token_file": hidePath,

	"tokens.issuer":      notPath,
	"tokens.algorithm":   notPath,
	"tokens.keys.source": notPath,
	"tokens.keys.path":   hidePath, // a file (source file) or a Vault path: hidden either way
	"tokens.keys.mount":  notPath,

	"broker.egress_proxy":                       notPath,
	"broker.api.socket":                         hideDir,
	"broker.api.allowed_users[]":                notPath,
	"broker.api.group":                          notPath,
	"broker.api.token_file":                     hidePath,
	"broker.api.tcp.listen":                     notPath,
	"broker.api.tcp.cert_file":                  hidePath,
	"broker.api.tcp.key_file":                   hidePath,
	"broker.api.tcp.client_ca_file":             hidePath,
	"broker.leases.seal_key_file":               hidePath,
	"broker.store.type":                         notPath,
	"broker.store.redis.address":                notPath,
	"broker.store.redis.sentinel.master_name":   notPath,
	"broker.store.redis.sentinel.addresses[]":   notPath,
	"broker.store.redis.sentinel.username":      notPath,
	"broker.store.redis.sentinel.password_file": hidePath,
	"broker.store.redis.username":               notPath,
	"broker.store.redis.password_file":          hidePath,
	"broker.store.redis.ca_file":                hidePath,
	"broker.store.redis.key_prefix":             notPath,
	"broker.secrets.file":                       hidePath,
	"broker.intents.*.class":                    notPath,
	"broker.intents.*.region":                   notPath,
	"broker.intents.*.destinations[].region":    notPath,
	"broker.intents.*.secret.source":            notPath,
	"broker.intents.*.secret.mount":             notPath,
	"broker.intents.*.secret.path":              notPath, // a Vault path, or a key of the secrets file
	"broker.intents.*.secret.field":             notPath,
	"broker.intents.*.secret.data.*":            notPath, // secret values: never listed anywhere
	// Each inject kind's settings: names of fields and headers, templates, URLs.
	"broker.intents.*.inject.aws_sigv4.access_key_id_field":             notPath,
	"broker.intents.*.inject.aws_sigv4.region":                          notPath,
	"broker.intents.*.inject.aws_sigv4.service":                         notPath,
	"broker.intents.*.inject.aws_sigv4.session_token_field":             notPath,
	"broker.intents.*.inject.basic.username":                            notPath,
	"broker.intents.*.inject.basic.username_field":                      notPath,
	"broker.intents.*.inject.client_cert.chain_field":                   notPath,
	"broker.intents.*.inject.client_cert.key_field":                     notPath,
	"broker.intents.*.inject.header.name":                               notPath,
	"broker.intents.*.inject.header.template":                           notPath,
	"broker.intents.*.inject.hmac.algorithm":                            notPath,
	"broker.intents.*.inject.hmac.encoding":                             notPath,
	"broker.intents.*.inject.hmac.header":                               notPath,
	"broker.intents.*.inject.hmac.message":                              notPath,
	"broker.intents.*.inject.hmac.template":                             notPath,
	"broker.intents.*.inject.hmac.timestamp_header":                     notPath,
	"broker.intents.*.inject.oauth2_client_credentials.auth_style":      notPath,
	"broker.intents.*.inject.oauth2_client_credentials.client_id":       notPath,
	"broker.intents.*.inject.oauth2_client_credentials.client_id_field": notPath,
	"broker.intents.*.inject.oauth2_client_credentials.header":          notPath,
	"broker.intents.*.inject.oauth2_client_credentials.scopes[]":        notPath,
	"broker.intents.*.inject.oauth2_client_credentials.template":        notPath,
	"broker.intents.*.inject.oauth2_client_credentials.token_url":       notPath,
	"broker.intents.*.inject.oauth2_jwt_bearer.audience":                notPath,
	"broker.intents.*.inject.oauth2_jwt_bearer.header":                  notPath,
	"broker.intents.*.inject.oauth2_jwt_bearer.issuer":                  notPath,
	"broker.intents.*.inject.oauth2_jwt_bearer.issuer_field":            notPath,
	"broker.intents.*.inject.oauth2_jwt_bearer.key_id_field":            notPath,
	"broker.intents.*.inject.oauth2_jwt_bearer.scopes[]":                notPath,
	"broker.intents.*.inject.oauth2_jwt_bearer.subject":                 notPath,
	"broker.intents.*.inject.oauth2_jwt_bearer.template":                notPath,
	"broker.intents.*.inject.oauth2_jwt_bearer.token_url":               notPath,
	"broker.intents.*.inject.placeholder.headers[]":                     notPath,
	"broker.intents.*.inject.query.name":                                notPath,
	"broker.intents.*.destinations[].host":                              notPath,
	"broker.intents.*.destinations[].path_prefix":                       notPath, // a URL path
	"broker.intents.*.destinations[].methods[]":                         notPath,

	"proxy.listen":                        notPath,
	"proxy.allow_cidrs[]":                 notPath,
	"proxy.upstream_ca_file":              hidePath,
	"proxy.resolve.*[]":                   notPath,
	"proxy.limits.scope":                  notPath,
	"proxy.intercept.ca_file":             hidePath, // plugins get a copy in their private directory
	"proxy.intercept.ca_key_file":         hidePath,
	"proxy.intercept.vault.mount":         notPath,
	"proxy.intercept.vault.path":          notPath,
	"proxy.intercept.permitted_domains[]": notPath,

	"host.plugins_dir":                            hidePath, // each plugin's package is shown again on top
	"host.lockfile":                               hidePath,
	"host.evidence":                               hidePath,
	"host.policy":                                 hidePath,
	"host.control_operators[]":                    notPath, // principal ids
	"host.decision.residency[]":                   notPath, // region names
	"host.control":                                hideUnixDir,
	"host.control_token_file":                     hidePath,
	"host.control_allowed_users[]":                notPath,
	"host.control_tls.cert_file":                  hidePath,
	"host.control_tls.key_file":                   hidePath,
	"host.control_tls.client_ca_file":             hidePath,
	"host.control_tls.id_from":                    notPath,
	"host.control_principals.tokens[].principal":  notPath,
	"host.control_principals.tokens[].file":       hidePath,
	"host.control_principals.peers[].user":        notPath,
	"host.control_principals.peers[].principal":   notPath,
	"host.control_principals.jwt.issuer":          notPath,
	"host.control_principals.jwt.audience":        notPath,
	"host.control_principals.jwt.jwks_url":        notPath,
	"host.control_principals.jwt.jwks_file":       hidePath,
	"host.control_principals.jwt.principal_claim": notPath,
	"host.control_principals.jwt.attributes[]":    notPath,
	"host.mcp.resource_url":                       notPath,
	"host.mcp.scopes[]":                           notPath,
	"host.broker":                                 hideUnixDir,
	"host.artifacts":                              hidePath,
	"host.evidence_key":                           hidePath,
	"host.admin":                                  notPath,
	"host.stderr_level":                           notPath,
	"host.redact[]":                               notPath,
	"host.https_proxy_opt_out[]":                  notPath,
	"host.executa.jwks":                           notPath,
	"host.executa.storage":                        hidePath,
	"host.executa.files_listen":                   notPath,
	"host.executa.files_dir":                      hidePath,
	"host.executa.sampling.fixture":               hidePath,
	"host.executa.sampling.openai.base_url":       notPath,
	"host.executa.sampling.openai.model":          notPath,
	"host.executa.sampling.openai.intent":         notPath,
	"host.executa.plugins[].name":                 notPath,
	"host.executa.plugins[].command":              shown,
	"host.executa.plugins[].args[]":               shown,
	"host.executa.plugins[].env.*":                notPath, // handed to the plugin
	"host.executa.plugins[].inherit_env[]":        notPath,
	"host.executa.plugins[].env_deny[]":           notPath,
	"host.executa.plugins[].credentials.*":        notPath,
	"host.executa.plugins[].settings.*":           notPath,
	"host.executa.plugins[].~RawCredentials.*":    notPath,
	"host.sandbox.level":                          notPath,
	"host.sandbox.read_only[]":                    shown,
	"host.sandbox.plugins.*.read_only[]":          shown,
	"host.sandbox.~Owner":                         notPath, // a name (the state directory, hidden above)
	"host.sandbox.~ClaimsDir":                     hidePath,
}
