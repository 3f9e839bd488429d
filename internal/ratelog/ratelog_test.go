package ratelog_test

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/leaf-id/leaf/internal/logbuf"
	"github.com/leaf-id/leaf/internal/ratelog"
)

// TestBurstThenSummary: the first Burst events of a window are logged one
// by one, the rest counted in one line when the window ends; a new window
// logs again.
func TestBurstThenSummary(t *testing.T) {
	var buf logbuf.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	var ends []func()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	l := ratelog.New(log, slog.LevelWarn, "authentication failed", ratelog.Options{
		Burst: 3, Window: time.Minute,
		Now: func() time.Time { return now },
		AfterFunc: func(d time.Duration, f func()) func() bool {
			ends = append(ends, f)
			return func() bool { return true }
		},
	})
	for i := range 8 {
		l.Log("addr", "10.0.0."+string(rune('0'+i)))
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 || len(ends) != 1 {
		t.Fatalf("%d lines, %d windows opened; want 3 and 1:\n%s", len(lines), len(ends), buf.String())
	}
	ends[0]()
	lines = strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 4 {
		t.Fatalf("no summary line:\n%s", buf.String())
	}
	for _, want := range []string{"level=WARN", `msg="authentication failed 5 more times in the last minute"`, "not_logged=5", "since=2026-01-02T03:04:05Z", "last.addr=10.0.0.7"} {
		if !strings.Contains(lines[3], want) {
			t.Errorf("summary %q lacks %q", lines[3], want)
		}
	}
	if l.Total() != 8 {
		t.Errorf("Total = %d, want 8", l.Total())
	}
	ends[0]() // a window with nothing dropped writes nothing
	l.Log("addr", "again")
	if got := strings.Count(buf.String(), "\n"); got != 5 || len(ends) != 2 {
		t.Fatalf("after the window: %d lines, %d windows; want 5 and 2:\n%s", got, len(ends), buf.String())
	}
}

func TestSummary(t *testing.T) {
	for _, tc := range []struct {
		n      int64
		window time.Duration
		want   string
	}{
		{57, time.Minute, "cluster: heartbeat failed 57 more times in the last minute"},
		{1, time.Minute, "cluster: heartbeat failed 1 more time in the last minute"},
		{3, 10 * time.Second, "cluster: heartbeat failed 3 more times in the last 10 seconds"},
		{3, 5 * time.Minute, "cluster: heartbeat failed 3 more times in the last 5 minutes"},
		{3, time.Hour, "cluster: heartbeat failed 3 more times in the last hour"},
		{3, 1500 * time.Millisecond, "cluster: heartbeat failed 3 more times in the last 1.5s"},
	} {
		if got := ratelog.Summary("cluster: heartbeat failed", tc.n, tc.window); got != tc.want {
			t.Errorf("Summary(%d, %v) = %q, want %q", tc.n, tc.window, got, tc.want)
		}
	}
}
