package evidence_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/airlock-dev/airlock/host/evidence"
)

// A log chains each record to the one before it; a signed checkpoint
// states its head, and verifying the file checks both.
func ExampleOpen() {
	dir, _ := os.MkdirTemp("", "evidence-example")
	defer os.RemoveAll(dir)
	l, err := evidence.Open(filepath.Join(dir, "evidence.jsonl"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer l.Close()
	key, err := evidence.LoadKey(filepath.Join(dir, "evidence-key.pem"))
	if err != nil {
		fmt.Println(err)
		return
	}
	r, _ := l.Append(evidence.Record{Type: "lifecycle.launch", Plugin: "example.tickets"})
	fmt.Println("seq", r.Seq, "chained to genesis:", r.Prev == evidence.GenesisHash)
	if _, err := l.Checkpoint(key); err != nil {
		fmt.Println(err)
		return
	}
	f, _ := os.Open(filepath.Join(dir, "evidence.jsonl"))
	defer f.Close()
	keys, err := evidence.ParseJWKS(key.JWKS())
	if err != nil {
		fmt.Println(err)
		return
	}
	v, err := evidence.VerifyWith(f, evidence.VerifyOptions{Keys: keys})
	fmt.Println("records:", v.Records, "checkpoints:", v.Checkpoints, "unsigned:", v.Unsigned, "err:", err)
	// Output:
	// seq 1 chained to genesis: true
	// records: 2 checkpoints: 1 unsigned: 0 err: <nil>
}
