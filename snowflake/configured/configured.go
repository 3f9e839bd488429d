// Package configured makes the Snowflake layout that the configuration's
// cluster section names, for the server and for the operator's
// subcommands alike, as persist/open opens the configured store. It is a
// package of its own, not a part of package snowflake or of package
// cluster, because config links the MySQL driver's DSN parser, which the
// protocol (it links both) must not; nor of config, which snowflake's
// defaults come from (config imports snowflake, not the reverse).
package configured

import (
	"fmt"
	"time"

	"github.com/leaf-id/leaf/config"
	"github.com/leaf-id/leaf/snowflake"
)

// Layout is the Snowflake layout of the cluster section, refused when it
// is not usable at now (snowflake.Layout.Usable: less than a year left).
// The server and leaf tags, which records it with the Snowflake tags it
// creates, both take it from here.
func Layout(c config.ClusterConfig, now time.Time) (snowflake.Layout, error) {
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
