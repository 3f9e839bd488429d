package config

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
)

// Secrets kept off the command line: server.password_file and
// server.admin_password_file name files holding the passwords, and
// RedactArgs hides what a command line holds anyway (pprof's cmdline,
// logs of the process's arguments).

// maxSecretFile bounds a password file: a password is one short line.
const maxSecretFile = 64 << 10

// readSecrets sets the passwords from their files. Setting a password and
// its file at once is an error: which one wins would be a guess.
// name is how errors name a key: the variable, the flag or the file and
// line that set it (Load's).
func (c *Config) readSecrets(name func(key string) string) error {
	var errs []error
	read := func(key, file string, dst *string, other string) {
		if file == "" {
			return
		}
		if *dst != "" {
			errs = append(errs, fmt.Errorf("config: %s: set together with %s (set one)", name(key), other))
			return
		}
		pw, err := readSecretFile(file)
		if err != nil {
			errs = append(errs, fmt.Errorf("config: %s: %w", name(key), err))
			return
		}
		*dst = pw
	}
	read("server.password_file", c.Server.PasswordFile, &c.Server.Password, "server.password")
	read("server.admin_password_file", c.Server.AdminPassFile, &c.Server.AdminPassword, "server.admin_password")
	return errors.Join(errs...)
}

// readSecretFile returns the first line of file, without its line ending;
// an empty one is an error (a file meant to set a password that sets none
// would leave the port open).
func readSecretFile(file string) (string, error) {
	f, err := os.Open(file)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b := make([]byte, maxSecretFile+1)
	n, err := f.Read(b)
	if err != nil && n == 0 {
		return "", fmt.Errorf("reading %s: %w", file, err)
	}
	if n > maxSecretFile {
		return "", fmt.Errorf("%s is larger than %d bytes: not a password file", file, maxSecretFile)
	}
	line, _, _ := strings.Cut(string(b[:n]), "\n")
	line = strings.TrimSuffix(line, "\r")
	if line == "" {
		return "", fmt.Errorf("%s: the first line is empty", file)
	}
	return line, nil
}

// secretKeys are the keys whose values RedactArgs hides.
var secretKeys = []string{"server.password", "server.admin_password"}

// RedactArgs returns a copy of a command line (flags as Load reads them)
// with the passwords replaced by Redacted: the values of
// --server.password and --server.admin_password, in both the =value and
// the separate-argument form, and the password in --store.dsn (with
// --store.driver's form when it is given, else hidden whole).
func RedactArgs(args []string) []string {
	out := make([]string, len(args))
	copy(out, args)
	driver := ""
	for i, a := range out {
		if name, v, has := splitFlag(a); name == "store.driver" {
			if !has && i+1 < len(out) {
				v = out[i+1]
			}
			driver = v
		}
	}
	for i := 0; i < len(out); i++ {
		name, value, hasValue := splitFlag(out[i])
		if name == "" {
			continue
		}
		redact := func(v string) string { return Redacted }
		switch {
		case slices.Contains(secretKeys, name):
		case name == "store.dsn":
			// Without --store.driver the form is unknown (the driver may
			// come from the file): RedactDSN then hides it whole.
			redact = func(v string) string { return RedactDSN(driver, v) }
		default:
			continue
		}
		if hasValue {
			out[i] = out[i][:len(out[i])-len(value)] + redact(value)
		} else if i+1 < len(out) {
			out[i+1] = redact(out[i+1])
			i++
		}
	}
	return out
}

// SecretFlags names the password keys given as flags in args, for a
// start-up warning: a flag is visible to every user of the machine.
func SecretFlags(args []string) []string {
	var found []string
	for _, a := range args {
		if name, _, _ := splitFlag(a); slices.Contains(secretKeys, name) && !slices.Contains(found, name) {
			found = append(found, name)
		}
	}
	return found
}

// splitFlag splits "--key=value" or "-key=value" into key and value;
// "--key" alone has no value. name is "" when a is not a flag.
func splitFlag(a string) (name, value string, hasValue bool) {
	if !strings.HasPrefix(a, "-") || a == "-" || a == "--" {
		return "", "", false
	}
	a = strings.TrimLeft(a, "-")
	name, value, hasValue = strings.Cut(a, "=")
	return name, value, hasValue
}

// autoCreateValue maps the booleans segment.auto_create took before it
// had three values onto them: true is on, false is off; other text is
// kept (lowercased) for Validate to judge.
func autoCreateValue(raw any) any {
	switch v := raw.(type) {
	case bool:
		if v {
			return AutoCreateOn
		}
		return AutoCreateOff
	case string:
		switch s := strings.ToLower(strings.TrimSpace(v)); s {
		case "true":
			return AutoCreateOn
		case "false":
			return AutoCreateOff
		default:
			return s
		}
	}
	return raw
}
