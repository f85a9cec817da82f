package config

import (
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"github.com/airlock-dev/airlock/internal/sandbox"
)

// Hidden lists every path of Airlock's own a plugin must never see: the
// state directory, the config file, keys, secrets, credentials files,
// certificates, sockets' directories, evidence, storage, the plugins
// directory (each plugin's own package is shown again on top) and the
// uid claims. The sandbox hides each even where an operator's read-only
// grant covers it.
//
// The list is not written out: Hidden walks the config by reflection and
// takes every string field that pathFields says is a path of Airlock's.
// A field pathFields does not know is hidden when its value is an
// absolute path (fail closed), and a test fails until it is classified,
// so a path field added later cannot be forgotten.
func (c *Config) Hidden() []string {
	var paths []string
	walkStrings(reflect.ValueOf(c).Elem(), "", func(key, v string) {
		kind, known := pathFields[key]
		if !known && strings.HasPrefix(v, "/") {
			kind = hidePath
		}
		switch kind {
		case hidePath:
			paths = append(paths, v)
		case hideDir:
			paths = append(paths, dirOf(v))
		case hideUnixDir:
			paths = append(paths, unixDir(v))
		}
	})
	if c.Host.Sandbox.ClaimsDir == "" {
		paths = append(paths, sandbox.DefaultClaimsDir)
	}
	var out []string
	for _, p := range paths {
		if p == "" {
			continue
		}
		// A relative path names a file below the process's working
		// directory, which a grant may cover too.
		if abs, err := filepath.Abs(p); err == nil {
			p = abs
		}
		if p != "/" && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// walkStrings calls f with the key and value of every string below v:
// keys are YAML names joined by '.', "[]" for a list element, ".*" for a
// map value, "~Name" for a field YAML does not read (yaml:"-"), and the
// kind's name for a field that holds one of several kinds of settings
// (an interface with a Kind method, as broker.Inject).
func walkStrings(v reflect.Value, key string, f func(key, v string)) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			walkStrings(v.Elem(), key, f)
		}
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			sf, fv := t.Field(i), v.Field(i)
			if !sf.IsExported() {
				continue
			}
			k := fieldKey(key, sf)
			if sf.Type.Kind() == reflect.Interface {
				// One of several kinds of settings (broker.Inject):
				// YAML keys it by its kind's name.
				kind, ok := fv.Interface().(interface{ Kind() string })
				if !ok {
					continue // nil
				}
				k = key + "." + kind.Kind()
			}
			walkStrings(fv, k, f)
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			walkStrings(v.Index(i), key+"[]", f)
		}
	case reflect.Map:
		for _, k := range v.MapKeys() {
			walkStrings(v.MapIndex(k), key+".*", f)
		}
	case reflect.String:
		f(key, v.String())
	}
}

// fieldKey is the key of struct field sf below key.
func fieldKey(key string, sf reflect.StructField) string {
	tag := sf.Tag.Get("yaml")
	name, opts, _ := strings.Cut(tag, ",")
	switch {
	case strings.Contains(opts, "inline"):
		return key
	case name == "-":
		name = "~" + sf.Name
	case name == "":
		name = strings.ToLower(sf.Name)
	}
	if key == "" {
		return name
	}
	return key + "." + name
}

func dirOf(p string) string {
	if p == "" {
		return ""
	}
	return filepath.Dir(p)
}

func unixDir(addr string) string {
	if p, ok := strings.CutPrefix(addr, "unix:"); ok {
		return filepath.Dir(p)
	}
	return ""
}
