package cli

import "testing"

func TestPlural(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want string
	}{{1, "confirmed by the running server"}, {2, "confirmed by the 2 running servers"}, {0, "confirmed by the 0 running servers"}} {
		if got := "confirmed by " + plural(tc.n, "the running server", "the %d running servers"); got != tc.want {
			t.Errorf("plural(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}
