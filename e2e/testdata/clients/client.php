<?php
// phpredis: the counter idioms as Redis code runs them. Usage:
// php client.php HOST PORT. Prints one name=value line per result,
// compared by e2e/clients_test.go.
const LUA = "local n = redis.call('INCR', KEYS[1]) "
    . "if n == 1 then redis.call('EXPIRE', KEYS[1], ARGV[1]) end return n";
[$host, $port] = [$argv[1], (int)$argv[2]];

function out(string $name, $value): void { echo "$name=$value\n"; }
function connect(string $host, int $port): Redis {
    $r = new Redis();
    $r->connect($host, $port, 60);
    $r->setOption(Redis::OPT_READ_TIMEOUT, 60);
    return $r;
}

$r = connect($host, $port);
foreach ([1, 2] as $i) {
    [$n, $expired] = $r->multi()->incr('e2e:tx')->expire('e2e:tx', 172800)->exec();
    out("tx$i", "$n," . ($expired ? 1 : 0));
}
// No EXECABORT here: phpredis queues only the commands it knows, with
// the arguments they take, and rawCommand does not work inside MULTI.
$sha = $r->script('load', LUA);
out('lua1', $r->evalSha($sha, ['e2e:lua', 172800], 1));
out('lua2', $r->eval(LUA, ['e2e:lua', 172800], 1));
$ttl = $r->ttl('e2e:lua');
out('lua_ttl', $ttl > 0 ? 'positive' : $ttl);

$first = $r->set('e2e:nx', 1000, ['nx']);
$again = $r->set('e2e:nx', 5, ['nx']);
out('nx', ($first ? 'OK' : 'nil') . ',' . ($again ? 'OK' : 'nil') . ',' . $r->incr('e2e:nx'));

$pipe = $r->pipeline();
for ($i = 0; $i < 1000; $i++) {
    $pipe->incr(sprintf('e2e:s:%04d', $i));
}
$pipe->exec();
$r->setOption(Redis::OPT_SCAN, Redis::SCAN_RETRY);
$seen = [];
$it = null;
while (($keys = $r->scan($it, 'e2e:s:*', 100)) !== false) {
    foreach ($keys as $k) {
        $seen[$k] = true;
    }
}
out('scan', count($seen));

$r1 = connect($host, $port);
$r1->select(1);
out('select', $r1->incr('e2e:db') . ',' . $r1->incr('e2e:db') . ',' . $r->incr('e2e:db'));
