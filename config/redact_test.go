package config

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestRedactDSN covers every driver's DSN form: the password, wherever
// the driver reads it from, becomes REDACTED and the rest stays as written;
// what does not parse is hidden whole.
func TestRedactDSN(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, driver, dsn, want string
	}{
		{"sqlite path", "sqlite", "data/leaf.db", "data/leaf.db"},
		{"sqlite path with @ and :", "sqlite", "/srv/a:b@c/leaf.db", "/srv/a:b@c/leaf.db"},
		{"empty", "mysql", "", ""},

		{"mysql password", "mysql", "u:p@tcp(h:3306)/d", "u:REDACTED@tcp(h:3306)/d"},
		{"mysql params kept", "mysql", "leaf:secret@tcp(127.0.0.1:3306)/leaf?parseTime=true&loc=UTC", "leaf:REDACTED@tcp(127.0.0.1:3306)/leaf?parseTime=true&loc=UTC"},
		{"mysql password with @, : and /", "mysql", "leaf:p@ss/w:rd@tcp(db:3306)/leaf?parseTime=true", "leaf:REDACTED@tcp(db:3306)/leaf?parseTime=true"},
		{"mysql no password", "mysql", "u@tcp(h:3306)/d", "u@tcp(h:3306)/d"},
		{"mysql empty password stays empty", "mysql", "leaf:@unix(/run/mysqld.sock)/leaf", "leaf:@unix(/run/mysqld.sock)/leaf"},
		{"mysql no user", "mysql", "/leaf", "/leaf"},
		{"mysql unparsable hidden whole", "mysql", "u:secret@tcp(h", "REDACTED"},
		{"mysql without a database hidden whole", "mysql", "leaf:secret@tcp(127.0.0.1:3306)", "REDACTED"},

		{"postgres URL", "postgres", "postgres://leaf:secret@db:5432/leaf?sslmode=disable", "postgres://leaf:REDACTED@db:5432/leaf?sslmode=disable"},
		{"postgresql URL, escaped password", "postgres", "postgresql://leaf:p%40ss%2Fw@db/leaf", "postgresql://leaf:REDACTED@db/leaf"},
		{"postgres URL, password in the query", "postgres", "postgres://leaf@db/leaf?sslmode=disable&password=secret", "postgres://leaf@db/leaf?sslmode=disable&password=REDACTED"},
		{"postgres URL, sslpassword", "postgres", "postgres://leaf:a@db/leaf?sslpassword=k3y&sslmode=verify-full", "postgres://leaf:REDACTED@db/leaf?sslpassword=REDACTED&sslmode=verify-full"},
		{"postgres URL, several hosts", "postgres", "postgres://leaf:secret@db1:5432,db2:5432/leaf", "postgres://leaf:REDACTED@db1:5432,db2:5432/leaf"},
		{"postgres URL without password", "postgres", "postgres://leaf@db/leaf", "postgres://leaf@db/leaf"},
		{"postgres URL unparsable hidden whole", "postgres", "postgres://leaf:secret@db:port/leaf", "REDACTED"},
		{"postgres keywords", "postgres", "host=db user=leaf password=secret dbname=leaf", "host=db user=leaf password=REDACTED dbname=leaf"},
		{"postgres keywords, quoted", "postgres", `host=db password = 'a b\'c' dbname=leaf`, "host=db password = REDACTED dbname=leaf"},
		{"postgres keywords, escaped space", "postgres", `password=a\ b sslmode=disable`, "password=REDACTED sslmode=disable"},
		{"postgres keywords, sslpassword last", "postgres", "host=db sslpassword=k3y", "host=db sslpassword=REDACTED"},
		{"postgres keywords without password", "postgres", "host=db dbname=leaf", "host=db dbname=leaf"},
		{"postgres keywords unterminated hidden whole", "postgres", "host=db password='secret", "REDACTED"},
		{"postgres keywords without = hidden whole", "postgres", "host=db secret", "REDACTED"},

		{"etcd endpoints", "etcd", "http://10.0.0.1:2379,http://10.0.0.2:2379", "http://10.0.0.1:2379,http://10.0.0.2:2379"},
		{"etcd URLs with passwords", "etcd", "https://root:secret@10.0.0.1:2379,https://root:s3@10.0.0.2:2379", "https://root:REDACTED@10.0.0.1:2379,https://root:REDACTED@10.0.0.2:2379"},
		{"etcd bare endpoints", "etcd", "root:secret@10.0.0.1:2379, 10.0.0.2:2379", "root:REDACTED@10.0.0.1:2379, 10.0.0.2:2379"},
		{"etcd unparsable hidden whole", "etcd", "http://root:secret@h:port,http://h2:2379", "REDACTED"},

		{"unknown driver hidden whole", "oracle", "scott/tiger@db", "REDACTED"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := RedactDSN(tt.driver, tt.dsn); got != tt.want {
				t.Errorf("RedactDSN(%q, %q) = %q, want %q", tt.driver, tt.dsn, got, tt.want)
			}
			if got := (StoreConfig{Driver: tt.driver, DSN: tt.dsn}).RedactedDSN(); got != tt.want {
				t.Errorf("RedactedDSN() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestRedactURL(t *testing.T) {
	t.Parallel()
	tests := []struct{ url, want string }{
		{"redis://u:secret@127.0.0.1:6379/0", "redis://u:REDACTED@127.0.0.1:6379/0"},
		{"rediss://:secret@redis.internal:6380", "rediss://:REDACTED@redis.internal:6380"},
		{"unix://u:secret@/run/redis.sock?db=1", "unix://u:REDACTED@/run/redis.sock?db=1"},
		{"redis://127.0.0.1:6379", "redis://127.0.0.1:6379"},
		{"redis://u@127.0.0.1:6379", "redis://u@127.0.0.1:6379"},
		{"redis://u:secret@h:port", "REDACTED"},
		{"", ""},
	}
	for _, tt := range tests {
		if got := RedactURL(tt.url); got != tt.want {
			t.Errorf("RedactURL(%q) = %q, want %q", tt.url, got, tt.want)
		}
	}
}

// RedactError scrubs the password out of a driver's error text, however
// the text quotes it, and keeps the error's chain.
func TestRedactError(t *testing.T) {
	t.Parallel()
	cause := errors.New("cause")
	tests := []struct {
		name     string
		c        StoreConfig
		msg      string // the error's text before the cause
		want     string
		password string // must not be in the result
	}{
		{"mysql DSN quoted", StoreConfig{Driver: "mysql", DSN: "leaf:hunter2@tcp(db:3306)/leaf"},
			"open leaf:hunter2@tcp(db:3306)/leaf", "open leaf:REDACTED@tcp(db:3306)/leaf", "hunter2"},
		{"mysql password alone", StoreConfig{Driver: "mysql", DSN: "leaf:hunter2@tcp(db:3306)/leaf"},
			"auth hunter2 refused", "auth REDACTED refused", "hunter2"},
		{"mysql unparsable", StoreConfig{Driver: "mysql", DSN: "leaf:hunter2@tcp(db"},
			"open leaf:hunter2@tcp(db; as hunter2", "open REDACTED; as REDACTED", "hunter2"},
		{"postgres escaped password read plain", StoreConfig{Driver: "postgres", DSN: "postgres://leaf:p%40ss@db/leaf"},
			"password p@ss refused", "password REDACTED refused", "p@ss"},
		{"postgres quoted keyword", StoreConfig{Driver: "postgres", DSN: `host=db password='it\'s'`},
			"password it's refused", "password REDACTED refused", "it's"},
		{"etcd", StoreConfig{Driver: "etcd", DSN: "http://root:hunter2@h:2379"},
			"dial http://root:hunter2@h:2379", "dial http://root:REDACTED@h:2379", "hunter2"},
		{"sqlite unchanged", StoreConfig{Driver: "sqlite", DSN: "data/leaf.db"},
			"open data/leaf.db", "open data/leaf.db", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.c.RedactError(fmt.Errorf("%s: %w", tt.msg, cause))
			if got := err.Error(); got != tt.want+": cause" {
				t.Errorf("RedactError = %q, want %q", got, tt.want+": cause")
			}
			if tt.password != "" && strings.Contains(err.Error(), tt.password) {
				t.Errorf("the password shows: %q", err)
			}
			if !errors.Is(err, cause) {
				t.Errorf("RedactError(%v) lost its cause", err)
			}
		})
	}
	if err := (StoreConfig{Driver: "mysql", DSN: "u:p@tcp(h)/d"}).RedactError(nil); err != nil {
		t.Errorf("RedactError(nil) = %v", err)
	}
	plain := errors.New("no password here")
	if err := (StoreConfig{Driver: "mysql", DSN: "u:secret@tcp(h)/d"}).RedactError(plain); err != plain {
		t.Errorf("RedactError of a clean error = %v, want it unchanged", err)
	}
}
