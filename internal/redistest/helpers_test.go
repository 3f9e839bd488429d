package redistest

import (
	"fmt"
	"reflect"
	"runtime"
	"testing"
)

// fatal is a testing.TB whose Fatalf records the failure and ends the
// goroutine, as the real one does.
type fatal struct {
	testing.TB
	msg string
}

func (f *fatal) Helper() {}

func (f *fatal) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// pairsOf runs Pairs on v and returns its map, or the failure it reported.
func pairsOf(t *testing.T, v any) (map[string]any, string) {
	f := &fatal{TB: t}
	var out map[string]any
	done := make(chan struct{})
	go func() {
		defer close(done)
		out = Pairs(f, v)
	}()
	<-done
	return out, f.msg
}

func TestPairs(t *testing.T) {
	want := map[string]any{"tag": "r", "loads": int64(2)}
	for _, tc := range []struct {
		name  string
		reply any
		want  map[string]any
		fails bool
	}{
		{"RESP3 map", map[any]any{"tag": "r", "loads": int64(2)}, want, false},
		{"RESP2 array", []any{"tag", "r", "loads", int64(2)}, want, false},
		{"empty", []any{}, map[string]any{}, false},
		{"odd array", []any{"tag", "r", "loads"}, nil, true},
		{"key not text", []any{int64(1), "r"}, nil, true},
		{"not a map", "OK", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, failure := pairsOf(t, tc.reply)
			if (failure != "") != tc.fails {
				t.Fatalf("failure %q; want a failure: %v", failure, tc.fails)
			}
			if !tc.fails && !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Pairs = %v, want %v", got, tc.want)
			}
		})
	}
}
