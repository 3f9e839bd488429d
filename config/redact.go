package config

import (
	"net/url"
	"strings"

	"github.com/go-sql-driver/mysql"
)

// Redacted stands for a secret in logs and error messages: the password
// in a DSN or a URL, server.password and server.admin_password. Empty
// secrets stay visibly empty: "not set" is useful to see.
const Redacted = "REDACTED"

// RedactDSN returns dsn, a store.dsn for driver, with its passwords
// replaced by Redacted, so it may name the store in logs and errors. It
// knows each driver's form, as the driver itself splits it:
//
//	sqlite    a file path: unchanged
//	mysql     go-sql-driver's user:password@net(addr)/db?params
//	postgres  a URL, postgres://user:password@host/db?password=...&sslpassword=...,
//	          or key=value pairs, password=secret or password='a \'quoted\' secret'
//	etcd      comma-separated endpoints, each [scheme://][user:password@]host:port
//
// A DSN that does not parse in its driver's form is hidden whole: where its
// password is cannot be told. So is a DSN of a driver it does not know.
func RedactDSN(driver, dsn string) string {
	if dsn == "" {
		return ""
	}
	found, ok := secrets(driver, dsn)
	if !ok {
		return Redacted
	}
	return replaceSpans(dsn, found)
}

// RedactURL returns a URL such as redis://user:password@host:port/0 with
// its password (in the user information, or a password or sslpassword
// parameter) replaced by Redacted; a string that is not a URL is hidden
// whole.
func RedactURL(raw string) string {
	if raw == "" {
		return ""
	}
	found, ok := urlSecrets(raw, 0)
	if !ok {
		return Redacted
	}
	return replaceSpans(raw, found)
}

// RedactedDSN returns the DSN with any password replaced, safe to log:
// RedactDSN(c.Driver, c.DSN).
func (c StoreConfig) RedactedDSN() string { return RedactDSN(c.Driver, c.DSN) }

// RedactError returns err with its text scrubbed of the store's password,
// for a driver's error that may quote it: the DSN becomes the redacted
// DSN, then what is left of the password, as written in the DSN and as
// the driver reads it, becomes Redacted. The result still matches err's
// chain with errors.Is and errors.As.
func (c StoreConfig) RedactError(err error) error {
	if err == nil || c.DSN == "" {
		return err
	}
	msg := err.Error()
	if strings.Contains(msg, c.DSN) {
		msg = strings.ReplaceAll(msg, c.DSN, c.RedactedDSN())
	}
	found, _ := secrets(c.Driver, c.DSN)
	for _, s := range found {
		for _, pw := range []string{c.DSN[s.start:s.end], s.plain} {
			if pw != "" {
				msg = strings.ReplaceAll(msg, pw, Redacted)
			}
		}
	}
	if msg == err.Error() {
		return err
	}
	return redactedError{msg: msg, err: err}
}

// redactedError is an error whose text hides a password but which still
// matches its cause with errors.Is and errors.As.
type redactedError struct {
	msg string
	err error
}

func (r redactedError) Error() string { return r.msg }
func (r redactedError) Unwrap() error { return r.err }

// secret is where one password sits in a DSN: dsn[start:end] as written,
// and plain, the password as the driver reads it (unescaped).
type secret struct {
	start, end int
	plain      string
}

// replaceSpans replaces each non-empty secret of s with Redacted; found is
// in order of start and the spans do not overlap.
func replaceSpans(s string, found []secret) string {
	var b strings.Builder
	last := 0
	for _, f := range found {
		if f.end == f.start {
			continue
		}
		b.WriteString(s[last:f.start])
		b.WriteString(Redacted)
		last = f.end
	}
	b.WriteString(s[last:])
	return b.String()
}

// secrets locates the passwords in dsn, in driver's form. ok is false
// when dsn does not parse in that form; found then holds what could be
// located anyway, for scrubbing error texts.
func secrets(driver, dsn string) (found []secret, ok bool) {
	switch driver {
	case "sqlite":
		return nil, true
	case "mysql":
		return mysqlSecrets(dsn)
	case "postgres":
		if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
			return urlSecrets(dsn, 0)
		}
		return keywordSecrets(dsn)
	case "etcd":
		return etcdSecrets(dsn)
	}
	return nil, false
}

// mysqlSecrets splits dsn as go-sql-driver does: the last '/' ends the
// address part, the last '@' before it ends the user information, whose
// first ':' starts the password (which may hold ':', '@' and '/').
func mysqlSecrets(dsn string) ([]secret, bool) {
	_, err := mysql.ParseDSN(dsn)
	end := strings.LastIndexByte(dsn, '/')
	if end < 0 {
		end = len(dsn)
	}
	at := strings.LastIndexByte(dsn[:end], '@')
	if at < 0 {
		return nil, err == nil
	}
	colon := strings.IndexByte(dsn[:at], ':')
	if colon < 0 {
		return nil, err == nil
	}
	return []secret{{start: colon + 1, end: at, plain: dsn[colon+1 : at]}}, err == nil
}

// urlSecrets locates the passwords of a URL that starts at offset in the
// string it is part of: the user information's, and the values of the
// password and sslpassword parameters (libpq and pgx read any setting
// from the query).
func urlSecrets(raw string, offset int) ([]secret, bool) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, false
	}
	var found []secret
	// url.Parse cuts the fragment, then the query, then takes the
	// authority after the first "//" up to the next '/'; the user
	// information ends at the authority's last '@', the user's name at its
	// first ':'.
	rest, _, _ := strings.Cut(raw, "#")
	rest, query, _ := strings.Cut(rest, "?")
	if pw, set := u.User.Password(); set {
		slashes := strings.Index(rest, "//")
		if slashes < 0 {
			return nil, false
		}
		base := slashes + 2
		authority, _, _ := strings.Cut(rest[base:], "/")
		at := strings.LastIndexByte(authority, '@')
		colon := strings.IndexByte(authority[:max(at, 0)], ':')
		if at < 0 || colon < 0 {
			return nil, false
		}
		found = append(found, secret{start: offset + base + colon + 1, end: offset + base + at, plain: pw})
	}
	if query != "" {
		start := len(rest) + 1
		for pair := range strings.SplitSeq(query, "&") {
			key, value, hasValue := strings.Cut(pair, "=")
			if k, err := url.QueryUnescape(key); err == nil && hasValue && (k == "password" || k == "sslpassword") {
				plain, err := url.QueryUnescape(value)
				if err != nil {
					plain = value
				}
				vstart := offset + start + len(key) + 1
				found = append(found, secret{start: vstart, end: vstart + len(value), plain: plain})
			}
			start += len(pair) + 1
		}
	}
	return found, true
}

// keywordSecrets reads PostgreSQL's key=value form as pgx does (libpq's
// rules): spaces around '=', a value either up to the next space, with
// backslash escapes, or in single quotes, with \' and \\.
func keywordSecrets(dsn string) ([]secret, bool) {
	var found []secret
	isSpace := func(c byte) bool { return strings.IndexByte(" \t\n\r\v\f", c) >= 0 }
	i := 0
	for {
		for i < len(dsn) && isSpace(dsn[i]) {
			i++
		}
		if i == len(dsn) {
			return found, true
		}
		eq := strings.IndexByte(dsn[i:], '=')
		if eq < 0 {
			return found, false
		}
		key := strings.TrimSpace(dsn[i : i+eq])
		i += eq + 1
		for i < len(dsn) && isSpace(dsn[i]) {
			i++
		}
		start, quoted := i, i < len(dsn) && dsn[i] == '\''
		if quoted {
			i++
		}
		var plain strings.Builder
		for ; i < len(dsn); i++ {
			c := dsn[i]
			if quoted && c == '\'' || !quoted && isSpace(c) {
				break
			}
			if c == '\\' {
				if i++; i == len(dsn) {
					return found, false
				}
				c = dsn[i]
			}
			plain.WriteByte(c)
		}
		end := i
		if quoted {
			if i == len(dsn) {
				return found, false // unterminated
			}
			i++
			end = i
		}
		if key == "password" || key == "sslpassword" {
			found = append(found, secret{start: start, end: end, plain: plain.String()})
		}
	}
}

// etcdSecrets reads comma-separated endpoints, each a URL or a bare
// [user:password@]host:port.
func etcdSecrets(dsn string) ([]secret, bool) {
	var found []secret
	ok := true
	start := 0
	for ep := range strings.SplitSeq(dsn, ",") {
		trimmed := strings.TrimSpace(ep)
		lead := strings.Index(ep, trimmed)
		switch {
		case strings.Contains(trimmed, "://"):
			f, urlOK := urlSecrets(trimmed, start+lead)
			found = append(found, f...)
			ok = ok && urlOK
		default:
			if at := strings.LastIndexByte(trimmed, '@'); at >= 0 {
				if colon := strings.IndexByte(trimmed[:at], ':'); colon >= 0 {
					base := start + lead
					found = append(found, secret{start: base + colon + 1, end: base + at, plain: trimmed[colon+1 : at]})
				}
			}
		}
		start += len(ep) + 1
	}
	return found, ok
}
