# redis-py: the counter idioms as Redis code runs them. Usage: client.py HOST PORT
# Prints one name=value line per result, compared by e2e/clients_test.go.
import sys

import redis

LUA = ("local n = redis.call('INCR', KEYS[1]) "
       "if n == 1 then redis.call('EXPIRE', KEYS[1], ARGV[1]) end return n")

host, port = sys.argv[1], int(sys.argv[2])
r = redis.Redis(host=host, port=port, socket_timeout=60)


def out(name, value):
    print(f"{name}={value}", flush=True)


for i in (1, 2):
    pipe = r.pipeline()  # MULTI ... EXEC
    pipe.incr("e2e:tx")
    pipe.expire("e2e:tx", 172800)
    n, expired = pipe.execute()
    out(f"tx{i}", f"{n},{int(expired)}")

pipe = r.pipeline()
pipe.incr("e2e:abort")
pipe.execute_command("NOSUCH")
try:
    pipe.execute()
    out("abort", "no error")
except redis.ResponseError:
    out("abort", f"refused,{r.incr('e2e:abort')}")

daily = r.register_script(LUA)
out("lua1", daily(keys=["e2e:lua"], args=[172800]))
out("lua2", daily(keys=["e2e:lua"], args=[172800]))
ttl = r.ttl("e2e:lua")
out("lua_ttl", "positive" if ttl > 0 else ttl)

first = r.set("e2e:nx", 1000, nx=True)
again = r.set("e2e:nx", 5, nx=True)
out("nx", f"{'OK' if first else 'nil'},{'OK' if again else 'nil'},{r.incr('e2e:nx')}")

pipe = r.pipeline(transaction=False)
for i in range(1000):
    pipe.incr(f"e2e:s:{i:04d}")
pipe.execute()
out("scan", len(set(r.scan_iter(match="e2e:s:*", count=100))))

r1 = redis.Redis(host=host, port=port, db=1, socket_timeout=60)
out("select", f"{r1.incr('e2e:db')},{r1.incr('e2e:db')},{r.incr('e2e:db')}")
