// Package idtest checks the IDs a test collected against the promise every
// other rests on: no ID is handed out twice.
package idtest

import "testing"

// Unique drains ids, which the test's collectors have closed, and fails t
// when an ID came twice or when there are not want of them.
func Unique(t testing.TB, ids <-chan int64, want int) {
	t.Helper()
	seen := make(map[int64]bool, want)
	for id := range ids {
		if seen[id] {
			t.Fatalf("ID %d handed out twice", id)
		}
		seen[id] = true
	}
	if len(seen) != want {
		t.Fatalf("%d IDs, want %d", len(seen), want)
	}
}
