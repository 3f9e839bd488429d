# Perl Redis: the counter idioms as Redis code runs them. Usage:
# perl client.pl HOST PORT. Prints one name=value line per result,
# compared by e2e/clients_test.go.
use strict;
use warnings;
use Redis;

my $LUA = "local n = redis.call('INCR', KEYS[1]) "
  . "if n == 1 then redis.call('EXPIRE', KEYS[1], ARGV[1]) end return n";
my ($host, $port) = @ARGV;
$| = 1;

sub out { my ($name, $value) = @_; print "$name=$value\n"; }
sub connect_to {
  return Redis->new(server => "$host:$port", reconnect => 0, cnx_timeout => 60, read_timeout => 60);
}

my $r = connect_to();
for my $i (1, 2) {
  $r->multi;
  $r->incr('e2e:tx');
  $r->expire('e2e:tx', 172800);
  my ($n, $expired) = $r->exec;
  out("tx$i", "$n,$expired");
}
$r->multi;
$r->incr('e2e:abort');
eval { $r->nosuch; 1 };
if (eval { $r->exec; 1 }) {
  out('abort', 'no error');
} else {
  out('abort', join(',', 'refused', $r->incr('e2e:abort')));
}

my $sha = $r->script_load($LUA);
out('lua1', $r->evalsha($sha, 1, 'e2e:lua', 172800));
out('lua2', $r->eval($LUA, 1, 'e2e:lua', 172800));
my $ttl = $r->ttl('e2e:lua');
out('lua_ttl', $ttl > 0 ? 'positive' : $ttl);

my $first = $r->set('e2e:nx', 1000, 'NX');
my $again = $r->set('e2e:nx', 5, 'NX');
out('nx', join(',', $first // 'nil', $again // 'nil', $r->incr('e2e:nx')));

$r->incr(sprintf('e2e:s:%04d', $_), sub {}) for 0 .. 999;
$r->wait_all_responses;
my %seen;
my $cursor = 0;
do {
  my $keys;
  ($cursor, $keys) = $r->scan($cursor, MATCH => 'e2e:s:*', COUNT => 100);
  $seen{$_} = 1 for @$keys;
} while ($cursor);
out('scan', scalar keys %seen);

my $r1 = connect_to();
$r1->select(1);
out('select', join(',', $r1->incr('e2e:db'), $r1->incr('e2e:db'), $r->incr('e2e:db')));
