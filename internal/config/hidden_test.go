package config

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/internal/sandbox"
)

// implementations are the kinds an interface field of the config may
// hold, one zero value each: a field of a kind's settings is a config
// field like any other.
func implementations(t *testing.T, it reflect.Type) []any {
	switch it {
	case reflect.TypeFor[broker.InjectKind]():
		var out []any
		for _, name := range broker.InjectKinds() {
			k, _ := broker.NewInjectKind(name)
			out = append(out, k)
		}
		return out
	}
	t.Fatalf("the config holds an interface this test does not know (%s): list its kinds in implementations", it)
	return nil
}

// typeKeys lists the key of every string field a Config may hold, from
// its types (walkStrings' keys for the values).
func typeKeys(t *testing.T, typ reflect.Type, key string, out map[string]bool) {
	switch typ.Kind() {
	case reflect.Pointer:
		typeKeys(t, typ.Elem(), key, out)
	case reflect.Struct:
		for i := range typ.NumField() {
			sf := typ.Field(i)
			if !sf.IsExported() {
				continue
			}
			if sf.Type.Kind() == reflect.Interface {
				for _, k := range implementations(t, sf.Type) {
					typeKeys(t, reflect.TypeOf(k), key+"."+k.(interface{ Kind() string }).Kind(), out)
				}
				continue
			}
			typeKeys(t, sf.Type, fieldKey(key, sf), out)
		}
	case reflect.Slice, reflect.Array:
		typeKeys(t, typ.Elem(), key+"[]", out)
	case reflect.Map:
		typeKeys(t, typ.Elem(), key+".*", out)
	case reflect.String:
		out[key] = true
	case reflect.Interface:
		t.Fatalf("%s: an interface outside a struct field", key)
	}
}

func configKeys(t *testing.T) map[string]bool {
	keys := map[string]bool{}
	typeKeys(t, reflect.TypeFor[Config](), "", keys)
	return keys
}

// Every string field of the config — every section's, every inject
// kind's — is classified: a path of Airlock's (hidden from plugins), a
// path shown on purpose, or no path. A field added later without a word
// on it fails here, instead of leaving a key file readable by plugins
// (as broker.leases.seal_key_file was, under an operator's grant of its
// directory).
func TestEveryConfigStringIsClassified(t *testing.T) {
	keys := configKeys(t)
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range keys {
			if !yield(k) {
				return
			}
		}
	}) {
		if _, ok := pathFields[k]; !ok {
			t.Errorf("%s: not in pathFields (internal/config/pathfields.go): is it a path of Airlock's (hidePath), one shown to plugins (shown), or no path (notPath)?", k)
		}
	}
	for k := range pathFields {
		if !keys[k] {
			t.Errorf("pathFields lists %s, which the config does not have", k)
		}
	}
}

// fill sets every string below v to a value naming its key, as the
// field's kind reads it, makes one element of every list and map, and
// one value of each kind of every interface field.
func fill(t *testing.T, v reflect.Value, key string) {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		fill(t, v.Elem(), key)
	case reflect.Struct:
		for i := range v.NumField() {
			sf := v.Type().Field(i)
			if !sf.IsExported() {
				continue
			}
			if sf.Type.Kind() == reflect.Interface {
				// One kind a value; the test fills each in turn
				// (TestHiddenHoldsEveryPathField covers the first).
				k := implementations(t, sf.Type)[0]
				kv := reflect.New(reflect.TypeOf(k).Elem())
				fill(t, kv, key+"."+k.(interface{ Kind() string }).Kind())
				v.Field(i).Set(kv)
				continue
			}
			fill(t, v.Field(i), fieldKey(key, sf))
		}
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 1, 1)
		fill(t, s.Index(0), key+"[]")
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		e := reflect.New(v.Type().Elem()).Elem()
		fill(t, e, key+".*")
		m.SetMapIndex(reflect.ValueOf("k").Convert(v.Type().Key()), e)
		v.Set(m)
	case reflect.String:
		p := "/probe/" + key
		if pathFields[key] == hideUnixDir {
			p = "unix:" + p + "/s.sock"
		}
		v.SetString(p)
	}
}

// The hide list the host computes holds exactly the fields classified as
// Airlock's paths — found wherever they sit (lists, maps, pointers) —
// and none of the others: no secret value, URL path or operator grant.
func TestHiddenHoldsEveryPathField(t *testing.T) {
	c := &Config{}
	fill(t, reflect.ValueOf(c).Elem(), "")
	got := c.Hidden()
	var want []string
	for k, kind := range pathFields {
		switch kind {
		case hidePath:
			want = append(want, "/probe/"+k)
		case hideDir:
			want = append(want, filepath.Dir("/probe/"+k))
		case hideUnixDir:
			want = append(want, "/probe/"+k)
		}
	}
	want = append(want, "/probe/host.sandbox.~ClaimsDir")
	slices.Sort(want)
	want = slices.Compact(want)
	if !slices.Equal(got, want) {
		t.Errorf("hidden:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// The files that hold a key, a secret or a token, and Airlock's state,
// are classified as hidden by name: a misclassification in the registry
// fails here, whatever the registry says.
func TestKeysAndSecretsAreHidden(t *testing.T) {
	for _, k := range []string{"state_dir", "~Path", "broker.leases.seal_key_file", "broker.secrets.file",
		"broker.api.token_file", "broker.api.tcp.key_file", "broker.store.redis.password_file",
		"broker.store.redis.sentinel.password_file", "proxy.intercept.ca_key_file", "tokens.keys.path",
		"vault.auth.token_file", "vault.auth.secret_id_file", "vault.auth.role_id_file",
		"vault.auth.service_account_token_file", "host.evidence", "host.evidence_key", "host.control_token_file",
		"host.control_tls.key_file", "host.executa.storage", "host.executa.files_dir", "host.plugins_dir",
		"host.lockfile", "host.control_principals.tokens[].file", "host.control_principals.jwt.jwks_file"} {
		if pathFields[k] != hidePath {
			t.Errorf("%s is not hidden", k)
		}
	}
	for _, k := range []string{"host.sandbox.read_only[]", "host.sandbox.plugins.*.read_only[]", "host.executa.plugins[].command"} {
		if pathFields[k] != shown {
			t.Errorf("%s is hidden: a plugin could not run", k)
		}
	}
}

// As it was seen: the leases' seal key in a directory an operator
// grants read-only, beside files that were hidden, is hidden too; and a
// relative path is hidden where it resolves.
func TestHiddenSealKeyFileUnderAGrant(t *testing.T) {
	c, err := Parse([]byte(`version: v1
broker:
  secrets: {file: /srv/airlock/secrets.yaml}
  leases: {seal_key_file: /srv/airlock/lease-seal.key}
host:
  evidence_key: /srv/airlock/evidence-key.pem
  sandbox: {read_only: [/srv/airlock]}
`))
	if err != nil {
		t.Fatal(err)
	}
	c.Host.Executa.Storage = "relative/aps.db"
	hidden := c.Hidden()
	wd, _ := os.Getwd()
	for _, want := range []string{"/srv/airlock/lease-seal.key", "/srv/airlock/secrets.yaml", "/srv/airlock/evidence-key.pem",
		filepath.Join(wd, "relative/aps.db"), sandbox.DefaultClaimsDir} {
		if !slices.Contains(hidden, want) {
			t.Errorf("%s is not hidden: %v", want, hidden)
		}
	}
	if slices.Contains(hidden, "/srv/airlock") {
		t.Errorf("the operator's grant itself is hidden: %v", hidden)
	}
}

// The sandbox's identity and disk settings decode from the config, are
// validated under their names, and a root host's uid claims are named
// after its state directory.
func TestSandboxIdentityAndDiskSettings(t *testing.T) {
	c, err := Parse([]byte(`version: v1
state_dir: /var/lib/airlock-test
host:
  sandbox:
    uid_range: {first: 200000, count: 500}
    limits: {disk_mb: 64}
    plugins:
      big: {limits: {disk_mb: 4096}}
`))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	s := c.Host.Sandbox
	if s.UIDRange != (sandbox.UIDRange{First: 200000, Count: 500}) || s.Owner != "/var/lib/airlock-test" {
		t.Errorf("uid_range %+v, owner %q", s.UIDRange, s.Owner)
	}
	if _, _, l := s.For("small"); l.DiskMB != 64 {
		t.Errorf("disk_mb of a plugin: %d, want 64", l.DiskMB)
	}
	if _, _, l := s.For("big"); l.DiskMB != 4096 {
		t.Errorf("disk_mb of big: %d, want 4096", l.DiskMB)
	}
	c.Host.Sandbox.UIDRange = sandbox.UIDRange{First: 65000, Count: 1000}
	c.Host.Sandbox.Limits.DiskMB = -1
	err = c.Validate()
	for _, want := range []string{"host.sandbox.uid_range: must not hold 65534", "host.sandbox.limits.disk_mb: must be between 1"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate: %v, want %q", err, want)
		}
	}
}
