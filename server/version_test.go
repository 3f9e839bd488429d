package server_test

import (
	"context"
	"strings"
	"testing"

	"github.com/leaf-id/leaf/server"
	"github.com/leaf-id/leaf/server/servertest"
)

// TestInfoVersion: INFO server names leaf's version and the commit it was
// built from, as Redis names its own (redis_version, redis_git_sha1).
func TestInfoVersion(t *testing.T) {
	const rev = "0123456789abcdef0123456789abcdef01234567"
	for _, tc := range []struct {
		name              string
		version, revision string
		want              string
	}{
		{"unknown", "", "", "\r\nleaf_version:dev\r\nleaf_git_sha1:00000000\r\n"},
		{"a release", "v1.2.3", rev, "\r\nleaf_version:v1.2.3\r\nleaf_git_sha1:" + rev + "\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := servertest.Start(t, servertest.Options{Server: server.Options{Version: tc.version, Revision: tc.revision}})
			c := newClient(t, in.Addr, 2, "")
			info, err := c.Info(context.Background(), "server").Result()
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(info, tc.want) {
				t.Errorf("INFO server lacks %q:\n%s", tc.want, info)
			}
		})
	}
}
