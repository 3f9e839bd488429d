package server

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/leaf-id/leaf/cluster"
	"github.com/leaf-id/leaf/persist"
	"github.com/leaf-id/leaf/resp"
	"github.com/leaf-id/leaf/segment"
	"github.com/leaf-id/leaf/snowflake"
)

// Every error reply leaf sends. The first two groups are byte for byte
// redis-server 7.0's texts (checked against its source and a live 7.0.15),
// so clients and scripts that match on them keep working; the SETINFO texts
// are 7.2's, where the subcommand appeared. The rest are leaf's own, for
// situations Redis never meets.
const (
	// Redis: dispatch, arity, parsing.
	errWrongArgs      = "ERR wrong number of arguments for '%s' command"
	errNotInteger     = "ERR value is not an integer or out of range"
	errUnknownCommand = "ERR unknown command '%s', with args beginning with: %s"
	errUnknownSub     = "ERR unknown subcommand '%s'. Try %s HELP."
	errSyntax         = "ERR syntax error"
	errDBIndex        = "ERR DB index is out of range"
	errInvalidCursor  = "ERR invalid cursor"
	errExpireOption   = "ERR Unsupported option %s"
	errExpireNX       = "ERR NX and XX, GT or LT options at the same time are not compatible"
	errExpireGTLT     = "ERR GT and LT options at the same time are not compatible"
	errExpireTime     = "ERR invalid expire time in '%s' command"
	errClientName     = "ERR Client names cannot contain spaces, newlines or special characters."
	errSetInfoOption  = "ERR Unrecognized option '%s'"
	errSlowlogCount   = "ERR count should be greater than or equal to -1"
	errSubSyntax      = "ERR unknown subcommand or wrong number of arguments for '%s'. Try %s HELP."
	errClientType     = "ERR Unknown client type '%s'"
	errClientID       = "ERR Invalid client ID"
	errClientKillID   = "ERR client-id should be greater than 0"
	errNoSuchClient   = "ERR No such client"
	errNoSuchUser     = "ERR No such user '%s'"
	errSetInfoValue   = "ERR %s cannot contain spaces, newlines or special characters."
	// leaf's: Redis takes any length; leaf keeps what CLIENT LIST shows small.
	errClientNameLong = "ERR Client names are limited to %d bytes"
	errSetInfoLong    = "ERR %s is limited to %d bytes"

	// Redis: transactions (cmd_tx.go).
	errMultiNested      = "ERR MULTI calls can not be nested"
	errExecNoMulti      = "ERR EXEC without MULTI"
	errDiscardNoMulti   = "ERR DISCARD without MULTI"
	errWatchInMulti     = "ERR WATCH inside MULTI is not allowed"
	errExecAbort        = "EXECABORT Transaction discarded because of previous errors."
	errExecAbortBecause = "EXECABORT Transaction discarded because of: %s"

	// Redis 7.0: scripting (cmd_script.go). A script's uncaught error is
	// followed by the script's SHA1 and the line.
	errNoScript          = "NOSCRIPT No matching script. Please use EVAL."
	errNotBusy           = "NOTBUSY No scripts in execution right now."
	errScriptFlushOption = "ERR SCRIPT FLUSH only support SYNC|ASYNC option"
	errNumKeysNegative   = "ERR Number of keys can't be negative"
	errNumKeysTooMany    = "ERR Number of keys can't be greater than number of args"
	errScriptCompile     = "ERR Error compiling script (new function): %s"
	errScriptCall        = "%s script: %s, on @user_script:%s."
	errScriptRun         = "ERR %s script: %s, on @user_script:%s."
	errScriptNoArgs      = "ERR Please specify at least one argument for this redis lib call"
	errScriptArgType     = "ERR Lua redis lib command arguments must be strings or integers"
	errScriptUnknown     = "ERR Unknown Redis command called from script"
	errScriptArity       = "ERR Wrong number of args calling Redis command from script"
	errScriptNotAllowed  = "ERR This Redis command is not allowed from script"

	// Redis: authentication and protocol negotiation.
	errNoAuth     = "NOAUTH Authentication required."
	errWrongPass  = "WRONGPASS invalid username-password pair or user is disabled."
	errNoPassword = "ERR AUTH <password> called without any password configured for the default user. " +
		"Are you sure your configuration is correct?"
	errHelloNoAuth = "NOAUTH HELLO must be called with the client already authenticated, " +
		"otherwise the HELLO AUTH <user> <pass> option can be used to authenticate the client " +
		"and select the RESP protocol version at the same time"
	errNoProto     = "NOPROTO unsupported protocol version"
	errProtoNotInt = "ERR Protocol version is not an integer or out of range"
	errHelloOption = "ERR Syntax error in HELLO option '%s'"

	// leaf: INCRBY counts. Redis accepts 0 and negatives (INCRBY is also
	// its decrement), but IDs never go back and 0 IDs reserve nothing, so
	// they get a text of their own rather than Redis's "not an integer",
	// which would be false. Non-canonical numbers ("+5", "07", "1e3", "-0")
	// get Redis's text, as in Redis.
	errCountNotPositive = "ERR increment must be positive: INCRBY tag n reserves n IDs (n >= 1)"
	errCountTooLarge    = "ERR increment exceeds max_batch (%d)"

	// leaf: the allocator's errors (see allocErrorText). TRYAGAIN marks
	// what a client may retry later.
	errUnknownTagAuto = "ERR unknown tag '%s' (auto-create is off)"
	errUnknownTag     = "ERR unknown tag '%s'"
	errUnknownTagStep = "ERR unknown tag '%s' (LEAF.CREATE %[1]s STEP n creates it)"
	errCannotCreate   = "ERR unknown tag '%s', and the database refuses to create it: %s"
	errUnavailable    = "TRYAGAIN no cached IDs for tag '%s' and the database is unavailable: %s"
	errTagGone        = "ERR tag '%s' was deleted from the database: %s"
	errGuard          = "ERR tag '%s': the database answered a range below IDs already reserved (max_id was lowered): %s"
	errOverflow       = "ERR tag '%s' has exhausted the 64-bit ID space"
	errShuttingDown   = "TRYAGAIN server is shutting down"
	errAllocator      = "ERR %s" // any other allocator error, as it says it

	// leaf: the cluster registry and Snowflake tags (cmd_cluster.go). A
	// lapsed lease and a Snowflake generator that cannot issue now are
	// TRYAGAIN: both pass.
	errLapsed     = "TRYAGAIN tag '%s': %s"
	errSnowflake  = "TRYAGAIN tag '%s': %s"
	errClusterOff = "ERR cluster features are off"
	// hintClusterOff follows why the features are off: what turns them on.
	hintClusterOff = " (the cluster tables leaf_node, leaf_worker, leaf_change and leaf_mode are missing or this user may not use them: " +
		"the start-up log shows the CREATE TABLE and GRANT statements that turn the features on)"
	errRegistry    = "ERR the cluster registry could not be read: %s"
	errUnconfirmed = "ERR %s of tag '%s' is set in the store and on this server, but %s"
	errModeStep    = "ERR STEP applies to segment tags only, not to MODE snowflake"
	errModeUnknown = "ERR unknown MODE '%s': segment or snowflake"

	// Redis 7.0: the Redis Cluster and Sentinel faces
	// (cmd_cluster_face.go, cmd_sentinel.go, cmd_pubsub.go).
	errClusterDisabled  = "ERR This instance has cluster support disabled"
	errInvalidSlot      = "ERR Invalid slot"
	errInvalidSlotCount = "ERR Invalid slot or number of keys"
	errUnknownNode      = "ERR Unknown node %s"
	errNoGoodReplica    = "NOGOODSLAVE No suitable replica to promote"
	errSubscribedOnly   = "ERR Can't execute '%s': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context"
	// leaf's: what the faces cannot do, and why.
	errClusterFixed  = "ERR CLUSTER %s is not supported: leaf's slot map follows its cluster registry (the live servers), which no command changes"
	errSentinelFixed = "ERR SENTINEL %s is not supported: every leaf server is a master of every name, from its cluster registry; there is nothing to configure"
	errChannel       = "ERR leaf publishes only Redis Sentinel's events (channels beginning with + or -, such as +switch-master), not '%s'"

	// leaf: what a transaction may make the server hold (cmd_tx.go).
	errTxTooLarge   = "ERR transaction too large: at most %d queued commands and %d MiB; the transaction is discarded at EXEC"
	errWatchTooMany = "ERR too many watched tags: at most %d"

	// leaf: the commands refused for what they would do to IDs
	// (cmd_keys.go): the name, then why.
	errRefused = "ERR %s is refused: %s"

	// leaf: a script stopped at Options.ScriptTimeLimit (Redis lets it
	// run and answers BUSY to everyone else).
	errScriptTimeout = "ERR script stopped after %s (server.script_time_limit): script: %s; the IDs it took are skipped"

	// leaf: CONFIG SET.
	errConfigSet = "ERR CONFIG SET is not supported: leaf reads its settings from leaf.yaml at start"

	// Redis 7.2's ACL text, for a non-admin connection running an
	// administrative command while server.admin_password is set
	// (cmd_admin.go): user, then the lowercase command name.
	// Redis's words, then what leaf's administrative user needs.
	errNoPerm = "NOPERM User %s has no permissions to run the '%s' command (administrative: AUTH admin <password> first)"

	// leaf: administration (cmd_admin.go). SET is LEAF.FLOOR under the name
	// Redis users reach for, so its errors say so; DEL is always refused.
	errCreateRefused = "ERR tag '%s' does not exist and was not created: %s"
	errTagExists     = "ERR tag '%s' already exists"
	errStepRange     = "ERR step must be between 1 and %d"
	errDescription   = "ERR description must be valid UTF-8 of at most %d characters"
	errFloorNegative = "ERR floor must be >= 0"
	errFloorRange    = "ERR floor %d is beyond the 64-bit ID space leaf hands out"
	errFloorLower    = "ERR LEAF.FLOOR never lowers: tag '%s' already handed out %d on this server, above %d; IDs never go back"
	errSetLower      = "ERR SET cannot lower tag '%s': this server already handed out %d, above %d; " +
		"SET tag n is LEAF.FLOOR tag n, which only raises"
	errSetNotInteger = "ERR value is not an integer or out of range: SET tag n raises the tag's floor to the integer n (LEAF.FLOOR)"
	errSetOption     = "ERR SET with %s is refused: %s"
	errDel           = "ERR DEL is refused: deleting a tag risks repeated IDs (a re-created row starts again at 1). " +
		"Leave the row (an unused tag costs one row); to skip IDs use LEAF.FLOOR tag n"
)

// allocErrorText is the reply for an error of the allocator on tag. The
// sentinel picks the text; TRYAGAIN marks what a client may retry (go-redis
// and others retry it on their own).
func allocErrorText(tag []byte, err error) string {
	switch {
	case errors.Is(err, segment.ErrBadTag):
		return fmt.Sprintf(errAllocator, err.Error()) // "invalid tag name: ..."
	case errors.Is(err, segment.ErrUnknownTag) && errors.Is(err, persist.ErrDenied):
		// The store's reason follows the sentinel: the privilege and its GRANT.
		_, why, _ := strings.Cut(err.Error(), persist.ErrDenied.Error()+": ")
		return fmt.Sprintf(errCannotCreate, tag, why)
	case errors.Is(err, segment.ErrCreateRefused):
		return fmt.Sprintf(errCreateRefused, tag, detail(err, segment.ErrCreateRefused, tag))
	case errors.Is(err, segment.ErrUnknownTag):
		return fmt.Sprintf(errUnknownTagAuto, tag)
	case errors.Is(err, segment.ErrClosed):
		return errShuttingDown
	case errors.Is(err, cluster.ErrLapsed):
		return fmt.Sprintf(errLapsed, tag, err.Error())
	case errors.Is(err, snowflake.ErrUnavailable) && errors.Is(err, cluster.ErrOff):
		return fmt.Sprintf(errSnowflake, tag, detail(err, snowflake.ErrUnavailable, tag)) + hintClusterOff
	case errors.Is(err, snowflake.ErrUnavailable):
		return fmt.Sprintf(errSnowflake, tag, detail(err, snowflake.ErrUnavailable, tag))
	case errors.Is(err, segment.ErrUnavailable):
		return fmt.Sprintf(errUnavailable, tag, detail(err, segment.ErrUnavailable, tag))
	case errors.Is(err, segment.ErrTagGone):
		return fmt.Sprintf(errTagGone, tag, detail(err, segment.ErrTagGone, tag))
	case errors.Is(err, segment.ErrGuard):
		return fmt.Sprintf(errGuard, tag, detail(err, segment.ErrGuard, tag))
	case errors.Is(err, segment.ErrOverflow):
		return fmt.Sprintf(errOverflow, tag)
	default:
		return fmt.Sprintf(errAllocator, err.Error())
	}
}

// allocError writes the reply for an error of the allocator on tag. Once
// Shutdown has cancelled the allocator calls, whatever they returned, the
// client is told the server is going away.
func (s *Server) allocError(c *client, conn *resp.Conn, tag []byte, err error) {
	if s.ctx.Err() != nil {
		s.writeError(c, conn, errShuttingDown)
		return
	}
	s.writeError(c, conn, allocErrorText(tag, err))
}

// detail strips what the reply already says from an allocator error: the
// sentinel's text and the `tag "name": ` the allocator puts before the
// cause. When the text has another shape, it is kept whole.
func detail(err, sentinel error, tag []byte) string {
	msg := err.Error()
	msg = strings.TrimPrefix(msg, sentinel.Error()+": ")
	if rest, ok := strings.CutPrefix(msg, "tag "+strconv.Quote(string(tag))+": "); ok {
		return rest
	}
	return msg
}

// sanitize replaces CR and LF with spaces, as Redis does for error texts
// built from client input: a newline would end the reply early and let the
// rest be read as another reply. It does not allocate when there is none.
func sanitize(s string) string {
	if strings.IndexAny(s, "\r\n") < 0 {
		return s
	}
	return strings.Map(func(r rune) rune {
		if r == '\r' || r == '\n' {
			return ' '
		}
		return r
	}, s)
}

// cstr is b up to its first NUL byte: Redis formats arguments with %s, which
// stops there, and the texts above follow it.
func cstr(b []byte) []byte {
	for i, ch := range b {
		if ch == 0 {
			return b[:i]
		}
	}
	return b
}

// trunc cuts b to at most n bytes (Redis's %.128s).
func trunc(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}

// unknownCommandText is Redis's reply to an unknown command: the name as the
// client sent it and the first arguments, quoted, each followed by a space,
// until 128 bytes of them are shown.
func unknownCommandText(args [][]byte) string {
	var list []byte
	for i := 1; i < len(args) && len(list) < 128; i++ {
		prec := 128 - len(list)
		list = append(list, '\'')
		list = append(list, trunc(cstr(args[i]), prec)...)
		list = append(list, '\'', ' ')
	}
	return fmt.Sprintf(errUnknownCommand, trunc(cstr(args[0]), 128), list)
}

// unknownSubText is Redis's reply to an unknown subcommand of a container
// command (CLIENT, COMMAND, CONFIG).
func unknownSubText(args [][]byte) string {
	return fmt.Sprintf(errUnknownSub, trunc(cstr(args[1]), 128), strings.ToUpper(string(cstr(args[0]))))
}
