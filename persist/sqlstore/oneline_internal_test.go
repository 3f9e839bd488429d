package sqlstore

import "testing"

func TestOneLine(t *testing.T) {
	in := "CREATE TABLE x (\n  a INT NOT NULL, -- a comment; with words\n  b INT   -- another\n) ENGINE=InnoDB"
	if got, want := oneLine(in), "CREATE TABLE x ( a INT NOT NULL, b INT ) ENGINE=InnoDB"; got != want {
		t.Fatalf("oneLine = %q, want %q", got, want)
	}
}
