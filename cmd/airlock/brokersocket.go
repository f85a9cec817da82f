package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// checkBrokerSocket says, before a dial, why the broker API socket cannot
// be reached: gRPC would only report "connection error" at the first
// call.
func checkBrokerSocket(path string) error {
	st, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("broker API socket %s does not exist: is airlock serve running? (it listens at broker.api.socket of its config; --broker or --config names another)", path)
	case err != nil:
		return fmt.Errorf("broker API socket %s: %w", path, err)
	case st.Mode()&fs.ModeSocket == 0:
		return fmt.Errorf("broker API socket %s is not a socket", path)
	}
	return nil
}
