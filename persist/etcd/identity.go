package etcd

import (
	"context"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leaf-id/leaf/persist"
)

var _ persist.Identified = (*Store)(nil)

// StoreID implements persist.Identified: the value of <prefix>store_id.
// The first call that finds the key missing writes a fresh identity, in a
// transaction that puts it only if the key was never created, so that
// servers starting together keep one; a store opened ReadOnly only reads.
func (s *Store) StoreID(ctx context.Context) (string, error) {
	key := s.prefix + persist.StoreIDKey
	var id string
	err := s.do(ctx, "read "+key, "", func(ctx context.Context, kv clientv3.KV) error {
		resp, err := kv.Get(ctx, key)
		if err != nil {
			return err
		}
		if len(resp.Kvs) > 0 || s.readOnly {
			id = ""
			if len(resp.Kvs) > 0 {
				id = string(resp.Kvs[0].Value)
			}
			return nil
		}
		fresh := persist.NewStoreID()
		txn, err := kv.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
			Then(clientv3.OpPut(key, fresh)).Else(clientv3.OpGet(key)).Commit()
		if err != nil {
			return err
		}
		if txn.Succeeded {
			id = fresh
			s.log.Info("persist: the store had no identity: gave it one", "backend", "etcd", "store_id", id)
			return nil
		}
		if kvs := txn.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
			id = string(kvs[0].Value)
		}
		return nil
	})
	return id, err
}
