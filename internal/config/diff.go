package config

import (
	"reflect"
	"slices"
	"strings"
)

// Changes names the settings that differ between old and next, as dotted
// YAML key paths ("broker.intents.tickets.read", "proxy.limits.per_plugin_rps"),
// sorted. It names keys, never values: a reload logs it. Sections are
// compared field by field and maps with string keys entry by entry; a
// list is one setting.
func Changes(old, next *Config) []string {
	var out []string
	diffValue(reflect.ValueOf(*old), reflect.ValueOf(*next), "", &out)
	slices.Sort(out)
	return out
}

// Under reports whether key is prefix or a setting inside it.
func Under(key, prefix string) bool {
	return key == prefix || strings.HasPrefix(key, prefix+".")
}

func diffValue(a, b reflect.Value, path string, out *[]string) {
	switch a.Kind() {
	case reflect.Struct:
		t := a.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if !f.IsExported() || name == "-" {
				continue
			}
			if name == "" {
				name = strings.ToLower(f.Name)
			}
			diffValue(a.Field(i), b.Field(i), join(path, name), out)
		}
	case reflect.Map:
		if a.Type().Key().Kind() != reflect.String {
			break
		}
		keys := map[string]bool{}
		for _, k := range a.MapKeys() {
			keys[k.String()] = true
		}
		for _, k := range b.MapKeys() {
			keys[k.String()] = true
		}
		for k := range keys {
			kv := reflect.ValueOf(k).Convert(a.Type().Key())
			av, bv := a.MapIndex(kv), b.MapIndex(kv)
			if !av.IsValid() || !bv.IsValid() || !reflect.DeepEqual(av.Interface(), bv.Interface()) {
				*out = append(*out, join(path, k))
			}
		}
		return
	}
	if a.Kind() != reflect.Struct && !reflect.DeepEqual(a.Interface(), b.Interface()) {
		*out = append(*out, path)
	}
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}
