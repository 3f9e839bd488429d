package resp

import "errors"

// errKilled ends a connection that Kill closed.
var errKilled = errors.New("resp: connection killed")

// The connection layer's replies, byte for byte redis-server 7.0's
// (networking.c). A new connection beyond Options.MaxClients gets
// errMaxClients and is closed, as in acceptCommonHandler. A malformed
// request gets "-ERR " and one of the protocol texts, then the connection
// closes (setProtocolError); the texts are processInlineBuffer's and
// processMultibulkBuffer's. Where Redis compares with its own fixed bounds
// (64 KiB lines, proto-max-bulk-len), the reader compares the whole
// request with Options.MaxRequestBytes, so one that cannot fit is refused
// as soon as a count or a length says so, before its body is read. The two
// "unauthenticated" texts are Redis 7's caps on a connection that has not
// authenticated while a password is set (Conn.SetUnauthenticated): at most
// 10 arguments of at most 16384 bytes.
const (
	errMaxClients            = "ERR max number of clients reached"
	errProtoUnbalancedQuotes = "Protocol error: unbalanced quotes in request"
	errProtoTooBigInline     = "Protocol error: too big inline request"
	errProtoTooBigMultiBulk  = "Protocol error: too big mbulk count string"
	errProtoMultiBulkLength  = "Protocol error: invalid multibulk length"
	errProtoUnauthMultiBulk  = "Protocol error: unauthenticated multibulk length"
	errProtoExpectedDollar   = "Protocol error: expected '$', got '%c'"
	errProtoTooBigBulkCount  = "Protocol error: too big bulk count string"
	errProtoBulkLength       = "Protocol error: invalid bulk length"
	errProtoUnauthBulkLength = "Protocol error: unauthenticated bulk length"
)
