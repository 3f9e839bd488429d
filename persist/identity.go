package persist

import (
	"context"
	"crypto/rand"
	"encoding/hex"
)

// The store's identity: a random id written into the store the first time
// a leaf server opens it with the right to, and read back by every server
// that opens it, so that an operator can tell from INFO and LEAF.NODES
// whether two servers share one store or each has its own (a mistyped
// path, a DSN pointing at another database). It is leaf's own: the SQL
// backends keep it in the table leaf_store, one row, which Leaf's servers
// ignore.

// Identified is implemented by the stores that keep an identity.
type Identified interface {
	// StoreID reads the store's identity: "" when the store has none (its
	// table is missing and could not be created). ErrUnavailable when the
	// database does not answer.
	StoreID(ctx context.Context) (string, error)
}

// StoreID is the identity of s, or "" when s keeps none.
func StoreID(ctx context.Context, s any) (string, error) {
	i, ok := s.(Identified)
	if !ok {
		return "", nil
	}
	return i.StoreID(ctx)
}

// NewStoreID returns a fresh identity: 32 random hexadecimal digits.
func NewStoreID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

// StoreIDKey is the name of the identity's row in leaf_store (and of its
// key under an etcd store's prefix).
const StoreIDKey = "store_id"
