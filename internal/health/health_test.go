package health

import (
	"context"
	"errors"
	"testing"
)

func TestReload(t *testing.T) {
	var r Reload
	if r.Check(context.Background()) != nil || r.Failures() != 0 {
		t.Fatal("the zero value is not ready")
	}
	boom := errors.New("permission denied")
	r.Record(boom)
	r.Record(boom)
	if !errors.Is(r.Check(context.Background()), boom) || r.Failures() != 2 {
		t.Fatalf("after two failures: %v %v", r.Err(), r.Failures())
	}
	r.Record(nil)
	if r.Err() != nil || r.Failures() != 2 {
		t.Fatalf("after a success: %v %v", r.Err(), r.Failures())
	}
}
