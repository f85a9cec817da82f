#!/usr/bin/env bash
# check-examples.sh: fail when a public library package has no Example
# test. Examples are the package's documentation a caller reads first
# (go doc shows them, go test runs them); internal/, generated proto/
# code (and the notes example's, examples/notes/notesv1), commands
# (package main) and test-only packages (deploy checks with no library
# code) are exempt.
set -euo pipefail
cd "$(dirname "$0")/.."
status=0
while read -r path name dir files; do
	case "$path" in */internal/* | */proto/* | */examples/notes/notesv1) continue ;; esac
	[ "$name" = main ] && continue
	[ "$files" = 0 ] && continue
	if ! grep -qs '^func Example' "$dir"/*_test.go; then
		echo "check-examples: $path has no Example test" >&2
		status=1
	fi
done < <(${GO:-go} list -f '{{.ImportPath}} {{.Name}} {{.Dir}} {{len .GoFiles}}' ./...)
exit $status
