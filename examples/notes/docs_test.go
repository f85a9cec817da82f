package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"
)

// docBlock is a file's code block in docs/plugin-v1.md: a
// "<!-- file: PATH -->" line, then a fenced block.
var docBlock = regexp.MustCompile("(?s)<!-- file: (\\S+) -->\n```[a-z]*\n(.*?)\n```\n")

// The walk-through's code blocks are these files, byte for byte: a
// provider written from the page alone is this one, which the daemon's
// integration test installs and calls.
func TestWalkThroughIsTheseFiles(t *testing.T) {
	doc, err := os.ReadFile("../../docs/plugin-v1.md")
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	for _, m := range docBlock.FindAllSubmatch(doc, -1) {
		path := string(m[1])
		seen = append(seen, path)
		b, err := os.ReadFile(filepath.Join("../..", path))
		if err != nil {
			t.Fatalf("the page shows %s, which does not exist: %v", path, err)
		}
		if string(b) != string(m[2])+"\n" {
			t.Errorf("docs/plugin-v1.md's block for %s differs from the file", path)
		}
	}
	for _, want := range []string{"examples/notes/numinance/ports/notes/v1/notes.proto", "examples/notes/main.go", "examples/notes/manifest.yaml"} {
		if !slices.Contains(seen, want) {
			t.Errorf("docs/plugin-v1.md shows no block for %s", want)
		}
	}
}
