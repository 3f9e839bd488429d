# redis-py as a Redis Cluster or Sentinel client of leaf. Usage:
#   cluster.py cluster HOST PORT TAGS    RedisCluster from one startup node
#   cluster.py sentinel TAGS HOST:PORT... Sentinel, master "mymaster"
# TAGS is a count: the tags are t:0, t:1, ... For each line "round" read
# from stdin it INCRs every tag once, retrying a tag on error until it
# answers (the client refreshing its map or master on the way), prints
# "TAG ID" per tag, then "end SECONDS ERRORS": how long the round took and
# how many errors were retried. e2e/cluster_clients_test.go drives it.
import sys
import time

import redis
from redis.cluster import RedisCluster
from redis.exceptions import RedisClusterException
from redis.sentinel import Sentinel

DEADLINE = 120  # a safety net per round, not an assertion on time

mode = sys.argv[1]
if mode == "cluster":
    host, port, count = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    client = RedisCluster(host=host, port=port, socket_timeout=30)
else:
    count = int(sys.argv[2])
    sentinels = [(a.rsplit(":", 1)[0], int(a.rsplit(":", 1)[1])) for a in sys.argv[3:]]
    sentinel = Sentinel(sentinels, socket_timeout=30)
    client = sentinel.master_for("mymaster", socket_timeout=30)
tags = [f"t:{i}" for i in range(count)]

for line in sys.stdin:
    if line.strip() != "round":
        continue
    start, errors = time.monotonic(), 0
    for tag in tags:
        while True:
            try:
                print(tag, client.incr(tag))
                break
            # RedisClusterException: redis-py 4.3's way to say that
            # it could not read the map from a node (a dead one).
            except (redis.RedisError, RedisClusterException, OSError) as err:
                errors += 1
                if time.monotonic() - start > DEADLINE:
                    print(f"fail {tag}: {err}", flush=True)
                    sys.exit(1)
                time.sleep(0.05)  # the client's backoff before it retries
    print(f"end {time.monotonic() - start:.3f} {errors}", flush=True)
