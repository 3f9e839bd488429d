// ioredis: the counter idioms as Redis code runs them. Usage:
// node client_ioredis.js HOST PORT (NODE_PATH holds ioredis). Prints one
// name=value line per result, compared by e2e/clients_test.go.
const Redis = require('ioredis');

const LUA = "local n = redis.call('INCR', KEYS[1]) " +
  "if n == 1 then redis.call('EXPIRE', KEYS[1], ARGV[1]) end return n";
const [host, port] = process.argv.slice(2);
const opts = { host, port: Number(port), commandTimeout: 60000, maxRetriesPerRequest: 0 };
const out = (name, value) => console.log(`${name}=${value}`);

(async () => {
  const r = new Redis(opts);
  for (const i of [1, 2]) {
    const res = await r.multi().incr('e2e:tx').expire('e2e:tx', 172800).exec();
    out(`tx${i}`, `${res[0][1]},${res[1][1]}`);
  }
  try {
    await r.multi().incr('e2e:abort').call('NOSUCH').exec();
    out('abort', 'no error');
  } catch (err) {
    out('abort', `refused,${await r.incr('e2e:abort')}`);
  }
  r.defineCommand('daily', { numberOfKeys: 1, lua: LUA });
  out('lua1', await r.daily('e2e:lua', 172800));
  out('lua2', await r.daily('e2e:lua', 172800));
  const ttl = await r.ttl('e2e:lua');
  out('lua_ttl', ttl > 0 ? 'positive' : ttl);

  const first = await r.set('e2e:nx', 1000, 'NX');
  const again = await r.set('e2e:nx', 5, 'NX');
  out('nx', `${first ?? 'nil'},${again ?? 'nil'},${await r.incr('e2e:nx')}`);

  const pipe = r.pipeline();
  for (let i = 0; i < 1000; i++) pipe.incr(`e2e:s:${String(i).padStart(4, '0')}`);
  await pipe.exec();
  const seen = new Set();
  await new Promise((resolve, reject) => {
    const s = r.scanStream({ match: 'e2e:s:*', count: 100 });
    s.on('data', (keys) => keys.forEach((k) => seen.add(k)));
    s.on('end', resolve);
    s.on('error', reject);
  });
  out('scan', seen.size);

  const r1 = new Redis({ ...opts, db: 1 });
  out('select', `${await r1.incr('e2e:db')},${await r1.incr('e2e:db')},${await r.incr('e2e:db')}`);
  await r1.quit();
  await r.quit();
})().catch((err) => { console.error(err); process.exit(1); });
