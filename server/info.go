package server

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/leaf-id/leaf/resp"
)

// INFO as Redis 7.0 writes it: its sections, in its order, with its field
// names wherever leaf has a true value for one; fields that mean nothing
// for leaf (forks, AOF rewrites, replication offsets, Lua memory) are
// left out rather than faked. leaf's own figures are in the Leaf section
// and, for the cluster registry, in Cluster. README.md ("Monitoring")
// says what each Redis field means for leaf.

// infoSections are INFO's sections in Redis's order, with leaf's own
// before Keyspace, which Redis prints last. The commandstats and
// latencystats sections are printed only when asked for by name, "all"
// or "everything", as in Redis.
func infoSections() [14]string {
	return [...]string{"server", "clients", "memory", "persistence", "stats", "replication", "cpu",
		"modules", "commandstats", "errorstats", "latencystats", "cluster", "leaf", "keyspace"}
}

// notDefault reports whether INFO without arguments leaves sec out.
func notDefault(sec string) bool { return sec == "commandstats" || sec == "latencystats" }

// cmdInfo: INFO [section ...]. No section or "default" prints the default
// sections, "all" and "everything" every section; unknown names print
// nothing, as in Redis. Sections are separated by an empty line; lines
// end with CRLF.
func cmdInfo(s *Server, c *client, conn *resp.Conn, args [][]byte) {
	sections := infoSections()
	var want [len(sections)]bool
	if len(args) == 1 {
		for i, sec := range sections {
			want[i] = !notDefault(sec)
		}
	}
	for _, a := range args[1:] {
		name := strings.ToLower(string(a))
		for i, sec := range sections {
			switch name {
			case "all", "everything":
				want[i] = true
			case "default":
				want[i] = want[i] || !notDefault(sec)
			case sec:
				want[i] = true
			}
		}
	}
	w := &infoWriter{}
	for i, sec := range sections {
		if !want[i] {
			continue
		}
		if w.b.Len() > 0 {
			w.b.WriteString("\r\n")
		}
		s.infoSection(w, sec)
	}
	conn.WriteVerbatim(w.b.String())
}

// infoWriter builds INFO's text.
type infoWriter struct{ b strings.Builder }

// line writes "k:v\r\n"; strings lose any CR or LF.
func (w *infoWriter) line(k string, v any) {
	w.b.WriteString(k)
	w.b.WriteByte(':')
	switch v := v.(type) {
	case string:
		w.b.WriteString(sanitize(v))
	case int:
		w.b.WriteString(strconv.Itoa(v))
	case int64:
		w.b.WriteString(strconv.FormatInt(v, 10))
	case bool:
		if v {
			w.b.WriteByte('1')
		} else {
			w.b.WriteByte('0')
		}
	}
	w.b.WriteString("\r\n")
}

// infoSection writes one section of INFO.
func (s *Server) infoSection(w *infoWriter, sec string) {
	line := w.line
	now := s.now()
	switch sec {
	case "server":
		w.b.WriteString("# Server\r\n")
		line("redis_version", redisVersion)
		line("redis_mode", "standalone")
		line("leaf_version", s.opts.Version)
		line("leaf_git_sha1", cmp.Or(s.opts.Revision, "00000000"))
		line("os", osName())
		line("arch_bits", strconv.IntSize)
		line("go_version", runtime.Version())
		line("process_id", s.pid)
		line("run_id", s.runID)
		line("tcp_port", s.port())
		line("server_time_usec", now.UnixMicro())
		up := int64(now.Sub(s.started) / time.Second)
		line("uptime_in_seconds", up)
		line("uptime_in_days", up/86400)
		if exe, err := os.Executable(); err == nil {
			line("executable", exe)
		}
		line("config_file", s.opts.ConfigFile)
	case "clients":
		w.b.WriteString("# Clients\r\n")
		line("connected_clients", s.connectedClients())
		line("maxclients", s.rs.MaxClients())
		line("blocked_clients", s.blocked.Load())
	case "memory":
		w.b.WriteString("# Memory\r\n")
		m := s.sampleMemory()
		line("used_memory", m.used)
		line("used_memory_human", humanBytes(m.used))
		if m.rss > 0 {
			line("used_memory_rss", m.rss)
			line("used_memory_rss_human", humanBytes(m.rss))
		}
		line("used_memory_peak", m.peak)
		line("used_memory_peak_human", humanBytes(m.peak))
		line("used_memory_peak_perc", fmt.Sprintf("%.2f%%", 100*float64(m.used)/float64(max(m.peak, 1))))
		if total, ok := systemMemory(); ok {
			line("total_system_memory", total)
			line("total_system_memory_human", humanBytes(total))
		}
		line("maxmemory", 0)
		line("maxmemory_human", "0B")
		line("maxmemory_policy", "noeviction")
		if m.rss > 0 {
			line("mem_fragmentation_ratio", fmt.Sprintf("%.2f", float64(m.rss)/float64(max(m.used, 1))))
		}
		line("mem_allocator", runtime.Version())
	case "persistence":
		w.b.WriteString("# Persistence\r\n")
		st := s.alloc.Stats()
		line("loading", 0)
		// Every range is written to the database before its first ID is
		// handed out: nothing is ever waiting to be saved.
		line("rdb_changes_since_last_save", 0)
		line("rdb_bgsave_in_progress", 0)
		line("rdb_last_save_time", s.lastStoreWrite().Unix())
		if st.StoreOK {
			line("rdb_last_bgsave_status", "ok")
		} else {
			line("rdb_last_bgsave_status", "err")
		}
		line("aof_enabled", 0)
	case "stats":
		rs := s.rs.Stats()
		inst := s.sampler.instantaneous()
		hits, misses := s.keyspaceHits()
		w.b.WriteString("# Stats\r\n")
		line("total_connections_received", rs.Accepted)
		line("total_commands_processed", s.stats.executed())
		line("instantaneous_ops_per_sec", int64(inst.ops+0.5))
		line("total_net_input_bytes", rs.NetIn)
		line("total_net_output_bytes", rs.NetOut)
		line("instantaneous_input_kbps", fmt.Sprintf("%.2f", inst.inKbps))
		line("instantaneous_output_kbps", fmt.Sprintf("%.2f", inst.outKbps))
		line("rejected_connections", rs.Rejected)
		// Tags never expire and are never evicted.
		line("expired_keys", 0)
		line("evicted_keys", 0)
		line("keyspace_hits", hits)
		line("keyspace_misses", misses)
		line("total_error_replies", s.errStats.total.Load())
		line("acl_access_denied_auth", s.authFailures.Load())
	case "replication":
		w.b.WriteString("# Replication\r\n")
		line("role", "master")
		line("connected_slaves", 0)
	case "cpu":
		w.b.WriteString("# CPU\r\n")
		if cpu, ok := cpuTimes(); ok {
			line("used_cpu_sys", fmt.Sprintf("%.6f", cpu.sys))
			line("used_cpu_user", fmt.Sprintf("%.6f", cpu.user))
			line("used_cpu_sys_children", fmt.Sprintf("%.6f", cpu.childSys))
			line("used_cpu_user_children", fmt.Sprintf("%.6f", cpu.childUser))
		}
	case "modules":
		w.b.WriteString("# Modules\r\n")
	case "commandstats":
		w.b.WriteString("# Commandstats\r\n")
		for _, st := range s.CommandStats() {
			if st.Name == UnknownCommand {
				continue // Redis counts unknown commands only as errors
			}
			calls := st.Calls - st.Rejected // Redis's calls: the ones that ran
			usec := st.Time.Microseconds()
			perCall := 0.0
			if calls > 0 {
				perCall = float64(st.Time.Nanoseconds()) / 1000 / float64(calls)
			}
			line("cmdstat_"+st.Name, fmt.Sprintf("calls=%d,usec=%d,usec_per_call=%.2f,rejected_calls=%d,failed_calls=%d",
				calls, usec, perCall, st.Rejected, st.Failed))
		}
	case "errorstats":
		w.b.WriteString("# Errorstats\r\n")
		codes, counts := s.errStats.snapshot()
		for i, code := range codes {
			line("errorstat_"+code, "count="+strconv.FormatInt(counts[i], 10))
		}
	case "latencystats":
		w.b.WriteString("# Latencystats\r\n")
		hists := s.stats.histograms()
		for i, h := range hists {
			if h == nil || i == 0 || h.total() == 0 {
				continue
			}
			line("latency_percentiles_usec_"+s.stats.names[i], fmt.Sprintf("p50=%s,p99=%s,p99.9=%s",
				percentileText(h, 50), percentileText(h, 99), percentileText(h, 99.9)))
		}
	case "leaf":
		st := s.alloc.Stats()
		w.b.WriteString("# Leaf\r\n")
		line("tags", st.Tags)
		line("waits", st.Waits)
		line("waited_loads", st.WaitedLoads)
		line("load_failures", st.LoadFailures)
		line("guard_trips", st.GuardTrips)
		line("guard_repairs", st.GuardRepairs)
		line("guard_table", st.GuardTable)
		line("store_retries", st.Retries)
		line("store_ambiguous", st.Ambiguous)
		line("queued_loads", st.QueuedLoads)
		line("store_ok", st.StoreOK)
		line("store_away_since", unixMilli(st.AwaySince))
		line("store_outages", st.Outages)
		line("store_probes", st.Probes)
		line("store_refused", st.Refused)
		line("store_last_error", st.StoreError)
		line("store_last_error_at", unixMilli(st.StoreErrorAt))
		s.infoReplication(line)
		s.infoLeafTags(line)
		s.infoSecurity(line)
	case "cluster":
		w.b.WriteString("# Cluster\r\n")
		s.infoCluster(line)
	case "keyspace":
		w.b.WriteString("# Keyspace\r\n")
		s.infoKeyspace(line)
	}
}

// keyspaceDB is one database of INFO keyspace and CONFIG GET databases.
type keyspaceDB struct {
	db   int
	keys int64
}

// keyspaceDBs are the databases (SELECT) that hold keys, by number,
// each with its count of tags; tags is the count of every database's.
func (s *Server) keyspaceDBs(tags int) []keyspaceDB {
	if tags == 0 {
		return nil // Redis omits an empty database
	}
	var dbs []keyspaceDB
	for db := range s.opts.Databases {
		if n := len(s.names(db)); n > 0 {
			dbs = append(dbs, keyspaceDB{db: db, keys: int64(n)})
		}
	}
	return dbs
}

// keyspaceHits are INFO's keyspace_hits and keyspace_misses: ID requests
// (INCR, INCRBY) answered from a segment in memory, without waiting, and
// requests that waited on the database (a segment load or a tag's
// lookup).
func (s *Server) keyspaceHits() (hits, misses int64) {
	for _, st := range s.CommandStats() {
		if st.Name == "incr" || st.Name == "incrby" {
			hits += st.Fast
		}
	}
	return hits, s.alloc.Stats().Waits
}

// lastStoreWrite is when a range was last written to the database for
// any tag, the start when none was.
func (s *Server) lastStoreWrite() time.Time {
	last := s.started
	for _, in := range s.alloc.Tags() {
		if in.LastLoad.After(last) {
			last = in.LastLoad
		}
	}
	return last
}

// humanBytes is Redis's bytesToHuman: 1023B, 1.00K, 1.50M, 2.00G.
func humanBytes(n int64) string {
	units := [...]string{"K", "M", "G", "T", "P"}
	if n < 1024 {
		return strconv.FormatInt(n, 10) + "B"
	}
	f := float64(n) / 1024
	for _, u := range units {
		if f < 1024 || u == "P" {
			return fmt.Sprintf("%.2f%s", f, u)
		}
		f /= 1024
	}
	return ""
}

// newRunID is a random identifier of this run of the server, as Redis's
// run_id: 40 hex digits.
func newRunID() string {
	var b [20]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// memoryFigures are INFO memory's figures.
type memoryFigures struct {
	used, rss, peak int64
}

// goHeapMetric is the Go runtime's count of bytes in live (and not yet
// swept) heap objects: what the Go allocator holds for the program, as
// Redis's used_memory is what its allocator holds.
const goHeapMetric = "/memory/classes/heap/objects:bytes"

// heapBytes reads goHeapMetric, without stopping the world (as
// runtime.ReadMemStats would).
func heapBytes() int64 {
	sample := []metrics.Sample{{Name: goHeapMetric}}
	metrics.Read(sample)
	if sample[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return int64(sample[0].Value.Uint64())
}

// sampleMemory reads the memory figures now, updating the peak.
func (s *Server) sampleMemory() memoryFigures {
	m := memoryFigures{used: heapBytes(), rss: processRSS()}
	m.peak = s.sampler.notePeak(m.used)
	return m
}

// sampler takes, every samplePeriod, the counts INFO's instantaneous
// figures are rates of, as Redis's serverCron does (16 samples a tenth of
// a second apart), and the heap size for used_memory_peak.
type sampler struct {
	once sync.Once
	mu   sync.Mutex
	ring [sampleCount]sample
	n    int // samples taken, up to sampleCount
	next int
	peak int64
}

type sample struct {
	at           time.Time
	ops, in, out int64
}

const (
	samplePeriod = 100 * time.Millisecond
	sampleCount  = 16
)

// startSampler starts the sampler once, until Shutdown.
func (s *Server) startSampler() {
	s.sampler.once.Do(func() {
		go func() {
			t := time.NewTicker(samplePeriod)
			defer t.Stop()
			for {
				select {
				case <-s.ctx.Done():
					return
				case <-t.C:
					s.takeSample()
				}
			}
		}()
	})
}

// takeSample records the counts now.
func (s *Server) takeSample() {
	rs := s.rs.Stats()
	smp := sample{at: s.now(), ops: s.stats.executed(), in: rs.NetIn, out: rs.NetOut}
	s.sampler.record(smp)
	s.sampler.notePeak(heapBytes())
}

func (sp *sampler) record(smp sample) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	sp.ring[sp.next] = smp
	sp.next = (sp.next + 1) % sampleCount
	sp.n = min(sp.n+1, sampleCount)
}

// notePeak raises the peak to used and returns it.
func (sp *sampler) notePeak(used int64) int64 {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	sp.peak = max(sp.peak, used)
	return sp.peak
}

// rates are INFO's instantaneous figures.
type rates struct {
	ops, inKbps, outKbps float64
}

// instantaneous is the rates between the oldest and the newest sample
// kept (1.5 s apart once 16 are), zero before two samples.
func (sp *sampler) instantaneous() rates {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.n < 2 {
		return rates{}
	}
	newest := sp.ring[(sp.next+sampleCount-1)%sampleCount]
	oldest := sp.ring[(sp.next+sampleCount-sp.n)%sampleCount]
	secs := newest.at.Sub(oldest.at).Seconds()
	if secs <= 0 {
		return rates{}
	}
	return rates{
		ops:     float64(newest.ops-oldest.ops) / secs,
		inKbps:  float64(newest.in-oldest.in) / secs / 1024,
		outKbps: float64(newest.out-oldest.out) / secs / 1024,
	}
}
