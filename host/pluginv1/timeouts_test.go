package pluginv1

import (
	"time"

	"github.com/airlock-dev/airlock/host/executa"
)

// testRoom is how long a test's plugin may take to start and answer: on a
// loaded machine a slow python3 start must not become "plugin did not
// answer in time". A test that exercises a timeout sets that one itself.
const testRoom = 2 * time.Minute

// roomy gives an Executa plugin's lifecycle calls testRoom unless the
// test set them.
func roomy(o executa.Options) executa.Options {
	o.Timeouts = o.Timeouts.Or(executa.Timeouts{Initialize: testRoom, Describe: testRoom, DescribeOnefile: testRoom,
		Invoke: testRoom, Health: testRoom})
	return o
}
