package leaftest_test

import (
	"context"
	"fmt"
	"log"

	"github.com/leaf-id/leaf/leaftest"
)

// In a test, leaftest.Start(t) starts the server and stops it at the
// test's cleanup:
//
//	func TestOrderIDs(t *testing.T) {
//		srv := leaftest.Start(t, leaftest.WithStep(100))
//		ids := NewIDs(srv.Client()) // the code under test
//		...
//	}
//
// Outside a test function, Run and Close do the same.
func Example() {
	srv, err := leaftest.Run(leaftest.WithPassword("s3cret"), leaftest.WithSnowflakeTags("event"))
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()

	ctx := context.Background()
	rdb := srv.Client() // a go-redis client, authenticated
	first := rdb.Incr(ctx, "order").Val()
	second := rdb.Incr(ctx, "order").Val()
	last := rdb.IncrBy(ctx, "order", 100).Val() // reserves 3..102
	event := rdb.Incr(ctx, "event").Val()       // a Snowflake ID: time-ordered, 19 digits today
	fmt.Println(first, second, last, len(fmt.Sprint(event)))
	// Output: 1 2 102 19
}
