package cli

import (
	"fmt"
	"time"

	"github.com/leaf-id/leaf/config"
	"github.com/leaf-id/leaf/snowflake"
)

// SnowflakeLayout is the Snowflake layout of the cluster section, refused
// when it is not usable at now (snowflake.Layout.Usable: less than a year
// left). The server and leaf tags, which records it with the Snowflake
// tags it creates, both take it from here; it lives here rather than in
// package cluster, which the protocol links, because config links the
// MySQL driver's DSN parser.
func SnowflakeLayout(c config.ClusterConfig, now time.Time) (snowflake.Layout, error) {
	epoch, err := c.Epoch()
	if err != nil {
		return snowflake.Layout{}, fmt.Errorf("cluster.snowflake_epoch: %w", err)
	}
	l := snowflake.Layout{Epoch: epoch, Unit: c.SnowflakeUnit, TimeBits: c.SnowflakeTimeBits,
		WorkerBits: c.SnowflakeWorkerBits, SeqBits: c.SnowflakeSequenceBits}
	if err := l.Usable(now); err != nil {
		return snowflake.Layout{}, fmt.Errorf("cluster.snowflake_*: %w", err)
	}
	return l, nil
}
