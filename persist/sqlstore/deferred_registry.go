package sqlstore

import (
	"context"
	"fmt"
	"time"

	"github.com/leaf-id/leaf/persist"
)

// The cluster registry of a Deferred store: each call opens the database
// first, as the Store methods do. A backend without a registry answers
// ErrNoCluster.

var _ persist.Registry = (*Deferred)(nil)

// registry returns the opened backend's Registry.
func (d *Deferred) registry(ctx context.Context) (persist.Registry, error) {
	m, err := d.store(ctx)
	if err != nil {
		return nil, err
	}
	r, ok := m.(persist.Registry)
	if !ok {
		return nil, fmt.Errorf("%s: %w", d.name, persist.ErrNoCluster)
	}
	return r, nil
}

// Join implements persist.Registry.
func (d *Deferred) Join(ctx context.Context, n persist.NodeInfo, ttl time.Duration) (int64, error) {
	r, err := d.registry(ctx)
	if err != nil {
		return 0, err
	}
	return r.Join(ctx, n, ttl)
}

// Renew implements persist.Registry.
func (d *Deferred) Renew(ctx context.Context, rn persist.Renewal) error {
	r, err := d.registry(ctx)
	if err != nil {
		return err
	}
	return r.Renew(ctx, rn)
}

// Leave implements persist.Registry.
func (d *Deferred) Leave(ctx context.Context, node string, worker int, bound int64) error {
	r, err := d.registry(ctx)
	if err != nil {
		return err
	}
	return r.Leave(ctx, node, worker, bound)
}

// GiveBackAfter implements persist.Registry.
func (d *Deferred) GiveBackAfter(ctx context.Context, tag string, from, to, seen int64) (bool, error) {
	r, err := d.registry(ctx)
	if err != nil {
		return false, err
	}
	return r.GiveBackAfter(ctx, tag, from, to, seen)
}

// Nodes implements persist.Registry.
func (d *Deferred) Nodes(ctx context.Context) ([]persist.Node, error) {
	r, err := d.registry(ctx)
	if err != nil {
		return nil, err
	}
	return r.Nodes(ctx)
}

// LeaseWorker implements persist.Registry.
func (d *Deferred) LeaseWorker(ctx context.Context, wr persist.WorkerRequest) (persist.Worker, error) {
	r, err := d.registry(ctx)
	if err != nil {
		return persist.Worker{}, err
	}
	return r.LeaseWorker(ctx, wr)
}

// Publish implements persist.Registry.
func (d *Deferred) Publish(ctx context.Context, c persist.Change) (int64, error) {
	r, err := d.registry(ctx)
	if err != nil {
		return 0, err
	}
	return r.Publish(ctx, c)
}

// Changes implements persist.Registry.
func (d *Deferred) Changes(ctx context.Context, after int64) ([]persist.Change, int64, error) {
	r, err := d.registry(ctx)
	if err != nil {
		return nil, 0, err
	}
	return r.Changes(ctx, after)
}

// CreateTag implements persist.Registry.
func (d *Deferred) CreateTag(ctx context.Context, t persist.Tag) (bool, error) {
	r, err := d.registry(ctx)
	if err != nil {
		return false, err
	}
	return r.CreateTag(ctx, t)
}
