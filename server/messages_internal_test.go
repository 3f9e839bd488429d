package server

import (
	"fmt"
	"strings"
	"testing"

	"github.com/leaf-id/leaf/cluster"
	"github.com/leaf-id/leaf/persist"
	"github.com/leaf-id/leaf/snowflake"
)

// TestClusterOffSaysWhatToDo: a Snowflake tag refused because the
// cluster features are off says so once, and what turns them on.
func TestClusterOffSaysWhatToDo(t *testing.T) {
	// As cluster.Node revokes the generator when the registry refuses.
	err := fmt.Errorf("%w: %w: %w", snowflake.ErrNoWorker, cluster.ErrOff,
		fmt.Errorf("join: %w", persist.ErrNoCluster))
	got := allocErrorText([]byte("sf"), err)
	if n := strings.Count(got, "cluster features are off"); n != 1 {
		t.Errorf("%q says 'cluster features are off' %d times, want once", got, n)
	}
	for _, want := range []string{"TRYAGAIN tag 'sf': ", "leaf_node, leaf_worker, leaf_change and leaf_mode", "GRANT"} {
		if !strings.Contains(got, want) {
			t.Errorf("%q lacks %q", got, want)
		}
	}
	// Other Snowflake errors carry no hint.
	if got := allocErrorText([]byte("sf"), snowflake.ErrNoWorker); strings.Contains(got, "GRANT") {
		t.Errorf("%q hints at grants", got)
	}
}
