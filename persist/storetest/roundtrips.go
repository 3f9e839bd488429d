package storetest

import (
	"testing"

	"github.com/leaf-id/leaf/internal/roundtrip"
	"github.com/leaf-id/leaf/persist"
)

// TakeRoundTrips checks that a Take on s, a handle whose connections go
// through proxy, costs at most most round trips (with the guard, on a
// connection already in the pool), and logs what a Take of a size and a
// TakeBatch cost: on a distant database each round trip is a wait a
// segment load adds up.
func TakeRoundTrips(t *testing.T, s persist.Store, proxy *roundtrip.Proxy, most int64) {
	t.Helper()
	if _, err := s.Create(t.Context(), "rt", 1000, ""); err != nil {
		t.Fatal(err)
	}
	for _, size := range []int64{0, 0, 5000} { // a connection in the pool, its statements prepared
		if _, err := s.Take(t.Context(), "rt", size); err != nil {
			t.Fatal(err)
		}
	}
	for _, size := range []int64{0, 5000} {
		proxy.Reset()
		if _, err := s.Take(t.Context(), "rt", size); err != nil {
			t.Fatal(err)
		}
		if n := proxy.Trips(); n > most {
			t.Errorf("Take(size %d): %d round trips, want at most %d", size, n, most)
		}
		t.Logf("Take(size %d): %d round trips", size, proxy.Trips())
	}
	proxy.Reset()
	reqs := []persist.TakeRequest{{Tag: "rt"}, {Tag: "rt2", Create: 1000}, {Tag: "rt3", Create: 1000}}
	for i, r := range s.TakeBatch(t.Context(), reqs) {
		if r.Err != nil {
			t.Fatalf("TakeBatch %s: %v", reqs[i].Tag, r.Err)
		}
	}
	t.Logf("TakeBatch of 3 tags, 2 new: %d round trips", proxy.Trips())
}
