package snowflake

import (
	"errors"
	"fmt"
	"time"
)

// ErrLayout: a layout that cannot make positive int64 IDs, or whose time
// has run out.
var ErrLayout = errors.New("snowflake: bad layout")

// Layout is how an ID's 63 bits are split, from the top: TimeBits of time
// units since Epoch, WorkerBits of worker id, SeqBits of sequence. The
// sign bit stays 0, so IDs are positive int64s, and they increase with
// time.
type Layout struct {
	Epoch      time.Time     // time 0; whole milliseconds
	Unit       time.Duration // one step of time: a whole number of milliseconds
	TimeBits   int
	WorkerBits int
	SeqBits    int
}

// DefaultLayout is Meituan Leaf's (and Twitter's): milliseconds since
// 2010-11-04 01:42:54.657 UTC in 41 bits, 10 bits of worker id (1,024
// servers), 12 bits of sequence (4,096 IDs per millisecond per server).
// It lasts until 2080; Leaf's /decodeSnowflakeId reads its IDs.
func DefaultLayout() Layout {
	return Layout{Epoch: time.UnixMilli(1288834974657).UTC(), Unit: time.Millisecond, TimeBits: 41, WorkerBits: 10, SeqBits: 12}
}

// Validate checks that the bits make 63, each part has at least one bit
// (the worker id up to 16, as its column), the unit is a whole number of
// milliseconds up to an hour, and the epoch a whole millisecond.
func (l Layout) Validate() error {
	switch {
	case l.TimeBits+l.WorkerBits+l.SeqBits != 63:
		return fmt.Errorf("%w: time, worker and sequence bits are %d+%d+%d, want 63 in all",
			ErrLayout, l.TimeBits, l.WorkerBits, l.SeqBits)
	case l.TimeBits < 1 || l.WorkerBits < 1 || l.SeqBits < 1:
		return fmt.Errorf("%w: every part needs at least one bit", ErrLayout)
	case l.WorkerBits > 16:
		return fmt.Errorf("%w: at most 16 worker bits (65,536 servers), got %d", ErrLayout, l.WorkerBits)
	case l.Unit < time.Millisecond || l.Unit > time.Hour || l.Unit%time.Millisecond != 0:
		return fmt.Errorf("%w: the time unit must be whole milliseconds from 1ms to 1h, got %s", ErrLayout, l.Unit)
	case l.Epoch.IsZero() || l.Epoch.UnixMilli()*int64(time.Millisecond) != l.Epoch.UnixNano():
		return fmt.Errorf("%w: the epoch must be a whole millisecond", ErrLayout)
	}
	return nil
}

// End is when the time bits run out: no ID can be made from then on.
func (l Layout) End() time.Time {
	return l.Epoch.Add(time.Duration(1<<l.TimeBits) * l.Unit)
}

// MinLifetime is the least time a layout must have left to be used.
const MinLifetime = 365 * 24 * time.Hour

// Usable checks the layout (Validate), and that at now its epoch has passed
// and IDs can be made for at least MinLifetime more.
func (l Layout) Usable(now time.Time) error {
	if err := l.Validate(); err != nil {
		return err
	}
	if l.Epoch.After(now) {
		return fmt.Errorf("%w: the epoch %s is in the future", ErrLayout, l.Epoch.UTC().Format(time.RFC3339Nano))
	}
	if l.Lasts(now) < MinLifetime {
		return fmt.Errorf("%w: %s runs out of time at %s, less than a year from now: move the epoch forward or give "+
			"it more time bits (IDs made with a later epoch may be lower than those made before: keep the tags that "+
			"exist on their layout)", ErrLayout, l, l.End().UTC().Format(time.RFC3339))
	}
	return nil
}

// Lasts is how long IDs can be made from now on.
func (l Layout) Lasts(now time.Time) time.Duration {
	end := l.Epoch.UnixMilli() + (int64(1)<<l.TimeBits)*l.Unit.Milliseconds()
	return time.Duration(end-now.UnixMilli()) * time.Millisecond
}

// Workers is the number of worker ids: 2^WorkerBits.
func (l Layout) Workers() int { return 1 << l.WorkerBits }

// Capacity is how many IDs one server makes per time unit: 2^SeqBits.
func (l Layout) Capacity() int64 { return 1 << l.SeqBits }

// String is the layout as the store records it with a Snowflake tag;
// servers with another layout refuse the tag.
func (l Layout) String() string {
	return fmt.Sprintf("epoch=%d unit=%s bits=%d/%d/%d", l.Epoch.UnixMilli(), l.Unit, l.TimeBits, l.WorkerBits, l.SeqBits)
}

// tickMs is the time unit that holds Unix millisecond ms (floor).
func (l Layout) tickMs(ms int64) int64 {
	d := ms - l.Epoch.UnixMilli()
	u := l.Unit.Milliseconds()
	if d < 0 {
		return (d - u + 1) / u
	}
	return d / u
}

// msOf is the first Unix millisecond of time unit tick.
func (l Layout) msOf(tick int64) int64 { return l.Epoch.UnixMilli() + tick*l.Unit.Milliseconds() }

// Compose makes the ID of time unit tick, worker and seq.
func (l Layout) Compose(tick int64, worker int, seq int64) int64 {
	return tick<<(l.WorkerBits+l.SeqBits) | int64(worker)<<l.SeqBits | seq
}

// Parts is an ID taken apart.
type Parts struct {
	Time   time.Time // the start of its time unit
	Worker int
	Seq    int64
}

// Decode takes an ID apart; false for a negative one, which no layout
// makes.
func (l Layout) Decode(id int64) (Parts, bool) {
	if id < 0 {
		return Parts{}, false
	}
	tick := id >> (l.WorkerBits + l.SeqBits)
	return Parts{
		Time:   time.UnixMilli(l.msOf(tick)),
		Worker: int(id>>l.SeqBits) & (1<<l.WorkerBits - 1),
		Seq:    id & (1<<l.SeqBits - 1),
	}, true
}
