package executa

import (
	"strings"
	"testing"
	"time"
)

// testRoom is how long a test's plugin may take to start and answer: a
// loaded machine must not turn a slow python3 start into "plugin did not
// answer in time". A test that exercises a timeout sets that one short.
const testRoom = 2 * time.Minute

// Every test of this package runs with roomy defaults; shutdown graces
// keep theirs (they bound how long a test waits for a plugin that ignores
// EOF, and the tests of that set them short).
func init() {
	defaultTimeouts = Timeouts{Initialize: testRoom, Describe: testRoom, DescribeOnefile: testRoom, Invoke: testRoom,
		Health: testRoom}.Or(defaultTimeouts)
}

// The defaults a Process gets are the roomy ones, and what a test (or an
// operator, host.executa.timeouts) sets wins over them.
func TestTimeoutsTestRoomAndOverrides(t *testing.T) {
	got := Timeouts{Initialize: 500 * time.Millisecond}.withDefaults()
	if got.Initialize != 500*time.Millisecond || got.Describe != testRoom || got.Health != testRoom || got.Invoke != testRoom {
		t.Fatalf("timeouts in tests: %+v", got)
	}
	for _, tc := range []struct {
		name string
		t    Timeouts
		ok   bool
	}{
		{"zero takes the defaults", Timeouts{}, true},
		{"raised", Timeouts{Initialize: 30 * time.Second, Health: 10 * time.Second}, true},
		{"negative", Timeouts{Describe: -time.Second}, false},
		{"over an hour", Timeouts{Invoke: 2 * time.Hour}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.t.Validate("host.executa.timeouts")
			if (err == nil) != tc.ok {
				t.Fatalf("Validate = %v", err)
			}
			if err != nil && !strings.Contains(err.Error(), "host.executa.timeouts.") {
				t.Fatalf("the error does not name the key: %v", err)
			}
		})
	}
}
