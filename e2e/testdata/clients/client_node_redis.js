// node-redis: the counter idioms as Redis code runs them. Usage:
// node client_node_redis.js HOST PORT (NODE_PATH holds redis). Prints one
// name=value line per result, compared by e2e/clients_test.go.
const { createClient } = require('redis');

const LUA = "local n = redis.call('INCR', KEYS[1]) " +
  "if n == 1 then redis.call('EXPIRE', KEYS[1], ARGV[1]) end return n";
const [host, port] = process.argv.slice(2);
const out = (name, value) => console.log(`${name}=${value}`);

(async () => {
  const r = createClient({ url: `redis://${host}:${port}` });
  r.on('error', (err) => { console.error(err); process.exit(1); });
  await r.connect();
  for (const i of [1, 2]) {
    const [n, expired] = await r.multi().incr('e2e:tx').expire('e2e:tx', 172800).exec();
    out(`tx${i}`, `${n},${Number(expired)}`);
  }
  try {
    await r.multi().incr('e2e:abort').addCommand(['NOSUCH']).exec();
    out('abort', 'no error');
  } catch (err) {
    out('abort', `refused,${await r.incr('e2e:abort')}`);
  }
  const daily = { keys: ['e2e:lua'], arguments: ['172800'] };
  out('lua1', await r.eval(LUA, daily));
  out('lua2', await r.eval(LUA, daily));
  const ttl = await r.ttl('e2e:lua');
  out('lua_ttl', ttl > 0 ? 'positive' : ttl);

  const first = await r.set('e2e:nx', '1000', { condition: 'NX' });
  const again = await r.set('e2e:nx', '5', { condition: 'NX' });
  out('nx', `${first ?? 'nil'},${again ?? 'nil'},${await r.incr('e2e:nx')}`);

  const incrs = [];
  for (let i = 0; i < 1000; i++) incrs.push(r.incr(`e2e:s:${String(i).padStart(4, '0')}`));
  await Promise.all(incrs); // auto-pipelined
  const seen = new Set();
  for await (const keys of r.scanIterator({ MATCH: 'e2e:s:*', COUNT: 100 })) {
    keys.forEach((k) => seen.add(k));
  }
  out('scan', seen.size);

  const r1 = createClient({ url: `redis://${host}:${port}/1` });
  await r1.connect();
  out('select', `${await r1.incr('e2e:db')},${await r1.incr('e2e:db')},${await r.incr('e2e:db')}`);
  await r1.quit();
  await r.quit();
})().catch((err) => { console.error(err); process.exit(1); });
