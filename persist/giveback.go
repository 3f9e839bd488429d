package persist

import "context"

// GiveBackRequest is one tag's give-back in a batch: max_id lowered from
// From to To, as Store.GiveBack does.
type GiveBackRequest struct {
	Tag      string
	From, To int64
}

// BatchGiver is implemented by the stores that give many tags back in one
// transaction (the SQL stores). A server that shuts down holding 200,000
// tags gives back in groups: one transaction per tag would outlast any
// shutdown deadline. A store without it is asked tag by tag.
type BatchGiver interface {
	// GiveBackBatch is GiveBack for every request, in one transaction:
	// matched[i] answers reqs[i], false also for a tag with no row. A tag
	// appears at most once. On an error nothing was given back (or, if
	// the commit's answer was lost, perhaps all of it).
	GiveBackBatch(ctx context.Context, reqs []GiveBackRequest) ([]bool, error)
	// GiveBackBatchAfter is Registry.GiveBackAfter for every request, in
	// one transaction: a request is refused (false) when a floor of its
	// tag at or above its To was published after seen.
	GiveBackBatchAfter(ctx context.Context, reqs []GiveBackRequest, seen int64) ([]bool, error)
}
