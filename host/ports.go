package host

import (
	"errors"
	"slices"
	"sync"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// ErrPortCompiled: a port compiled into the host cannot be replaced or
// removed by an installed one.
var ErrPortCompiled = errors.New("the port is compiled into the host and cannot be replaced or removed")

// PortSet is the set of port files the host serves, by package name
// ("numinance.ports.tickets.v1"): the ones compiled into the binary and
// the ones an operator installed. They, not a provider's copies, govern
// every plugin/v1 call; the plugin/v1 runtime looks a call's port up at
// each call, so a port added while the host runs is served at once.
//
// # Concurrency
//
// Every method is safe for concurrent use. A nil *PortSet serves no port.
type PortSet struct {
	mu       sync.RWMutex
	files    map[string]protoreflect.FileDescriptor
	compiled map[string]bool
	refused  map[string]string
}

// NewPortSet returns a set serving the compiled port files given; they
// can be neither replaced nor removed.
func NewPortSet(compiled ...protoreflect.FileDescriptor) *PortSet {
	s := &PortSet{files: map[string]protoreflect.FileDescriptor{}, compiled: map[string]bool{}, refused: map[string]string{}}
	for _, f := range compiled {
		s.files[string(f.Package())] = f
		s.compiled[string(f.Package())] = true
	}
	return s
}

// Lookup returns the host's copy of the port file of package pkg.
func (s *PortSet) Lookup(pkg string) (protoreflect.FileDescriptor, bool) {
	if s == nil {
		return nil, false
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	f, ok := s.files[pkg]
	return f, ok
}

// Add serves f, an installed port file, under its package, in place of
// an installed one of the same package; a compiled port is never
// replaced (ErrPortCompiled).
func (s *PortSet) Add(f protoreflect.FileDescriptor) error {
	pkg := string(f.Package())
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.compiled[pkg] {
		return ErrPortCompiled
	}
	s.files[pkg] = f
	delete(s.refused, pkg)
	return nil
}

// Remove stops serving the installed port of package pkg; it reports
// whether one was served. A compiled port is never removed
// (ErrPortCompiled).
func (s *PortSet) Remove(pkg string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.compiled[pkg] {
		return false, ErrPortCompiled
	}
	_, ok := s.files[pkg]
	delete(s.files, pkg)
	delete(s.refused, pkg)
	return ok, nil
}

// Compiled reports whether pkg is a port compiled into the host.
func (s *PortSet) Compiled(pkg string) bool {
	if s == nil {
		return false
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.compiled[pkg]
}

// Names are the packages served, sorted.
func (s *PortSet) Names() []string {
	if s == nil {
		return nil
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	names := make([]string, 0, len(s.files))
	for n := range s.files {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Refuse records that the installed port pkg is not served, and why (a
// stored file that no longer has its pinned digest, say), for operators
// to see; Add or Remove clears it.
func (s *PortSet) Refuse(pkg, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.compiled[pkg] {
		delete(s.files, pkg)
		s.refused[pkg] = reason
	}
}

// Refused are the installed ports not served, with the reason, by
// package.
func (s *PortSet) Refused() map[string]string {
	if s == nil {
		return nil
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make(map[string]string, len(s.refused))
	for k, v := range s.refused {
		out[k] = v
	}
	return out
}
