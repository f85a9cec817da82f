package randid_test

import (
	"fmt"
	"regexp"
	"testing"

	"github.com/airlock-dev/airlock/internal/randid"
)

func TestHex(t *testing.T) {
	hexRE := regexp.MustCompile(`^[0-9a-f]*$`)
	for _, n := range []int{0, 8, 16} {
		a, b := randid.Hex(n), randid.Hex(n)
		if len(a) != 2*n || !hexRE.MatchString(a) {
			t.Errorf("Hex(%d) = %q: want %d hex digits", n, a, 2*n)
		}
		if n > 0 && a == b {
			t.Errorf("Hex(%d) returned %q twice", n, a)
		}
	}
}

func ExampleHex() {
	id := "g_" + randid.Hex(16)
	fmt.Println(len(id))
	// Output: 34
}
