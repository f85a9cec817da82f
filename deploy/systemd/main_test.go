package systemd_test

import (
	"os"
	"testing"

	"github.com/airlock-dev/airlock/internal/testenv"
)

// airlockBin is the airlock command the units run, built once per test
// run and kept between runs (testenv.Binaries).
var airlockBin string

func TestMain(m *testing.M) {
	dir := testenv.Binaries("airlock-systemd-test-",
		testenv.Binary{Path: &airlockBin, Pkg: "../../cmd/airlock", Name: "airlock"})
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
