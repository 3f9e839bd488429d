package client_test

import (
	"context"
	"fmt"
	"log"
	"net"
	"os"
	"path/filepath"

	"github.com/redis/go-redis/v9"

	"github.com/leaf-id/leaf/client"
	"github.com/leaf-id/leaf/persist"
	"github.com/leaf-id/leaf/persist/sqlite"
	"github.com/leaf-id/leaf/segment"
	"github.com/leaf-id/leaf/server"
)

func Example() {
	addr, stop := exampleLeaf() // in production: your leaf server's address
	defer stop()

	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	gen, err := client.New(rdb, "order", client.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer gen.Close()

	ctx := context.Background()
	id, err := gen.Next(ctx) // leases IDs 1 to 100, hands out 1
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("order", id)
	last, err := gen.NextN(ctx, 10) // the next 10, from the same lease
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("orders %d to %d\n", last-9, last)
	// Output:
	// order 1
	// orders 2 to 11
}

// exampleLeaf runs a leaf server in this process on a fresh SQLite file,
// on a free loopback port.
func exampleLeaf() (addr string, stop func()) {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "leaf-example-")
	if err != nil {
		log.Fatal(err)
	}
	db, err := sqlite.Open(ctx, filepath.Join(dir, "leaf.db"), persist.Options{CreateSchema: true})
	if err != nil {
		log.Fatal(err)
	}
	alloc := segment.New(db, segment.DefaultOptions())
	if err := alloc.Start(ctx); err != nil {
		log.Fatal(err)
	}
	srv := server.New(alloc, server.Options{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	return ln.Addr().String(), func() {
		srv.Shutdown(ctx)
		<-served
		alloc.Close(ctx)
		db.Close()
		os.RemoveAll(dir)
	}
}
