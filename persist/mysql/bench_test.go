package mysql_test

import (
	"testing"

	"github.com/leaf-id/leaf/persist/mysql"
	"github.com/leaf-id/leaf/persist/mysql/mysqltest"
	"github.com/leaf-id/leaf/persist/storetest"
)

func BenchmarkTake(b *testing.B) {
	s, err := mysql.Open(b.Context(), mysqltest.DSN(b), storetest.BenchOptions())
	if err != nil {
		b.Fatal(err)
	}
	storetest.BenchmarkTake(b, s)
}

func BenchmarkTakeBatch(b *testing.B) {
	s, err := mysql.Open(b.Context(), mysqltest.DSN(b), storetest.BenchOptions())
	if err != nil {
		b.Fatal(err)
	}
	storetest.BenchmarkTakeBatch(b, s, 1000)
}
