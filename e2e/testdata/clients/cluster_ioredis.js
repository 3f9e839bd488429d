// ioredis as a Redis Cluster client of leaf. Usage:
// node cluster_ioredis.js HOST PORT TAGS (NODE_PATH holds ioredis).
// TAGS is a count: the tags are t:0, t:1, ... For each line "round" read
// from stdin it INCRs every tag once, retrying a tag on error until it
// answers, prints "TAG ID" per tag, then "end SECONDS ERRORS".
// e2e/cluster_clients_test.go drives it, as cluster.py.
const Redis = require('ioredis');
const readline = require('readline');

const DEADLINE = 120000; // a safety net per round, not an assertion on time
const [host, port, count] = process.argv.slice(2);
const cluster = new Redis.Cluster([{ host, port: Number(port) }], {
  redisOptions: { commandTimeout: 30000 },
});
const tags = Array.from({ length: Number(count) }, (_, i) => `t:${i}`);
const pause = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function round() {
  const start = Date.now();
  let errors = 0;
  const lines = [];
  for (const tag of tags) {
    for (;;) {
      try {
        lines.push(`${tag} ${await cluster.incr(tag)}`);
        break;
      } catch (err) {
        errors++;
        if (Date.now() - start > DEADLINE) {
          console.log(`fail ${tag}: ${err}`);
          process.exit(1);
        }
        await pause(50); // the client's backoff before it retries
      }
    }
  }
  lines.push(`end ${((Date.now() - start) / 1000).toFixed(3)} ${errors}`);
  process.stdout.write(lines.join('\n') + '\n');
}

(async () => {
  const rl = readline.createInterface({ input: process.stdin });
  for await (const line of rl) {
    if (line.trim() === 'round') await round();
  }
  cluster.disconnect();
})();
