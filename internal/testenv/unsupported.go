//go:build !linux

package testenv

// This package is Linux only, and so is Airlock. On any other system this
// file is the package's only file, and the constant below stops the build
// with a message that says so, instead of a list of missing system calls.
const _ = "Airlock runs on Linux only: the test harness ties each service it starts to the test (PR_SET_PDEATHSIG)" + 0
