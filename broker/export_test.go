package broker

// Test helpers the external tests (package broker_test) share.
var NewLedgerStore = newLedgerStore
