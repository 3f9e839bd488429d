# ruby-redis: the counter idioms as Redis code runs them. Usage:
# ruby client.rb HOST PORT. Prints one name=value line per result,
# compared by e2e/clients_test.go.
require 'redis'

LUA = "local n = redis.call('INCR', KEYS[1]) " \
      "if n == 1 then redis.call('EXPIRE', KEYS[1], ARGV[1]) end return n"
host, port = ARGV[0], Integer(ARGV[1])
r = Redis.new(host: host, port: port, timeout: 60)
$stdout.sync = true

def out(name, value)
  puts "#{name}=#{value}"
end

[1, 2].each do |i|
  n, expired = r.multi do |tx|
    tx.incr('e2e:tx')
    tx.expire('e2e:tx', 172_800)
  end
  out("tx#{i}", "#{n},#{expired ? 1 : 0}")
end

begin
  r.multi do |tx|
    tx.incr('e2e:abort')
    tx.call('NOSUCH')
  end
  out('abort', 'no error')
rescue Redis::CommandError
  out('abort', "refused,#{r.incr('e2e:abort')}")
end

sha = r.script(:load, LUA)
out('lua1', r.evalsha(sha, keys: ['e2e:lua'], argv: [172_800]))
out('lua2', r.eval(LUA, keys: ['e2e:lua'], argv: [172_800]))
ttl = r.ttl('e2e:lua')
out('lua_ttl', ttl.positive? ? 'positive' : ttl)

first = r.set('e2e:nx', 1000, nx: true)
again = r.set('e2e:nx', 5, nx: true)
out('nx', "#{first ? 'OK' : 'nil'},#{again ? 'OK' : 'nil'},#{r.incr('e2e:nx')}")

r.pipelined do |pipe|
  1000.times { |i| pipe.incr(format('e2e:s:%04d', i)) }
end
out('scan', r.scan_each(match: 'e2e:s:*', count: 100).to_a.uniq.size)

r1 = Redis.new(host: host, port: port, db: 1, timeout: 60)
out('select', "#{r1.incr('e2e:db')},#{r1.incr('e2e:db')},#{r.incr('e2e:db')}")
