package etcd

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/leaf-id/leaf/persist"
)

// The key layout under the prefix (store.etcd_prefix, "/leaf/" by default).
// Each kind of record has a directory of its own, so that a listing by
// prefix reads one kind, and later kinds (servers, worker ids: nodes/,
// workers/) take directories of their own beside these.
const (
	// tagsDir holds one key per tag, <prefix>tags/<tag>: the tag's record,
	// Leaf's row (record).
	tagsDir = "tags/"
	// guardDir holds one key per tag, <prefix>guard/<tag>: the end
	// (exclusive) of the highest range leaf handed out, in decimal. It is
	// a key apart from the tag's, so that deleting and re-creating the
	// tag's key (an operator's mistake, a restored backup) leaves it.
	guardDir = "guard/"
)

// record is the value of a tag's key: JSON, so that an operator can read
// and write it with etcdctl, e.g.
//
//	{"max_id":1001,"step":1000,"description":"orders","update_time":"2026-03-02T10:15:04.5Z"}
//
// max_id and step are required; description and update_time may be left
// out (empty, and the zero time). Other fields are ignored and dropped by
// the next write.
type record struct {
	MaxID       int64     `json:"max_id"`
	Step        int64     `json:"step"`
	Description string    `json:"description,omitempty"`
	UpdateTime  time.Time `json:"update_time,omitzero"`
}

func (r record) encode() string {
	b, err := json.Marshal(r)
	if err != nil {
		panic(err) // a struct of numbers, a string and a time always marshals
	}
	return string(b)
}

// decodeRecord reads a tag's value; a value that is not a record (written
// by hand or by another tool) is an error wrapping persist.ErrSchema that
// names the key.
func decodeRecord(kv *mvccpb.KeyValue) (record, error) {
	var v struct {
		MaxID       *int64    `json:"max_id"`
		Step        *int64    `json:"step"`
		Description string    `json:"description"`
		UpdateTime  time.Time `json:"update_time"`
	}
	if err := json.Unmarshal(kv.Value, &v); err != nil || v.MaxID == nil || v.Step == nil {
		return record{}, fmt.Errorf("%w: the value of %q is not a tag's record "+
			`(want JSON such as {"max_id":1,"step":1000}): %.100q`, persist.ErrSchema, kv.Key, kv.Value)
	}
	return record{MaxID: *v.MaxID, Step: *v.Step, Description: v.Description, UpdateTime: v.UpdateTime.UTC()}, nil
}

func (r record) tag(name string) persist.Tag {
	return persist.Tag{Name: name, MaxID: r.MaxID, Step: r.Step, Description: r.Description, UpdateTime: r.UpdateTime}
}

// decodeGuard reads a guard's value, a decimal integer.
func decodeGuard(kv *mvccpb.KeyValue) (int64, error) {
	high, err := strconv.ParseInt(string(kv.Value), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: the value of %q is not a guard (want a decimal integer): %.100q",
			persist.ErrSchema, kv.Key, kv.Value)
	}
	return high, nil
}

// snapshot is what one read saw of a tag's two keys. A revision of 0 means
// the key is absent.
type snapshot struct {
	tagRev   int64 // mod revision of the tag's key
	rec      record
	guardRev int64 // mod revision of the guard's key
	high     int64 // the guard's value, when guardRev != 0
}

// snapshotOf reads the two keys' ranges (each of at most one key).
func snapshotOf(tagKVs, guardKVs []*mvccpb.KeyValue) (snapshot, error) {
	var s snapshot
	if len(tagKVs) > 0 {
		rec, err := decodeRecord(tagKVs[0])
		if err != nil {
			return snapshot{}, err
		}
		s.tagRev, s.rec = tagKVs[0].ModRevision, rec
	}
	if len(guardKVs) > 0 {
		high, err := decodeGuard(guardKVs[0])
		if err != nil {
			return snapshot{}, err
		}
		s.guardRev, s.high = guardKVs[0].ModRevision, high
	}
	return s, nil
}
