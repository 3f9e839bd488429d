package config

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"

	"github.com/spf13/pflag"
	"github.com/spf13/viper"
	"go.yaml.in/yaml/v3"
)

// ErrHelp is returned by Load when the arguments ask for help (-h, --help).
// The caller prints Usage and exits successfully. It wraps pflag.ErrHelp.
var ErrHelp = fmt.Errorf("config: help requested: %w", pflag.ErrHelp)

// ImplicitFile is the file Load reads, from the working directory, when
// --config is not given and the file exists.
const ImplicitFile = "leaf.yaml"

// Load builds the configuration from the defaults, the YAML file, the
// environment and the flags, each overriding the one before, and validates it.
//
// args are the command-line arguments without the program name. environ is
// the environment as os.Environ returns it ("KEY=value"); only LEAF_<SECTION>_<KEY>
// variables of known keys are read, and when a name repeats the last one wins.
// A variable that is set but empty counts as set.
//
// With --config=PATH the file must exist; without it, ./leaf.yaml is read when
// present. -h or --help returns ErrHelp. Every other error starts with
// "config: " and names the key, flag or file at fault; several validation
// errors are joined into one.
func Load(args []string, environ []string) (Config, error) {
	fset, raw, configPath, help := newFlagSet()
	if err := fset.Parse(args); err != nil {
		return Config{}, flagError(err)
	}
	if *help {
		return Config{}, ErrHelp
	}
	if fset.NArg() > 0 {
		return Config{}, fmt.Errorf("config: unexpected argument %q (flags are --section.key=value)", fset.Arg(0))
	}

	v := viper.New()
	var cfg Config
	path, explicit := *configPath, fset.Changed("config")
	if explicit && path == "" {
		return Config{}, errors.New("config: --config: empty path")
	}
	if !explicit {
		path = ImplicitFile
	}
	data, err := os.ReadFile(path)
	switch {
	case err == nil:
		if err := readFile(v, path, data); err != nil {
			return Config{}, err
		}
		cfg.File = path
	case !explicit && errors.Is(err, fs.ErrNotExist):
		// No ./leaf.yaml: defaults, environment and flags only.
	case explicit:
		return Config{}, fmt.Errorf("config: --config: %w", err)
	default:
		return Config{}, fmt.Errorf("config: %w", err)
	}

	// viper's AutomaticEnv reads the process environment, which tests cannot
	// inject in parallel: the environment and then the flags are set as
	// overrides instead, the flag last so it wins. origin remembers who set
	// each key, so that an error names what the user wrote.
	def, env := Default(), envMap(environ)
	errs := unknownEnv(env)
	origin := fileLines(cfg.File, data)
	for _, k := range keys() {
		v.SetDefault(k.name, reflect.ValueOf(k.field(&def)).Elem().Interface())
		if val, ok := env[envName(k.name)]; ok {
			v.Set(k.name, val)
			origin[k.name] = envName(k.name) + " (" + k.name + ")"
		}
		if fset.Changed(k.name) {
			v.Set(k.name, raw[k.name].text)
			origin[k.name] = "--" + k.name
		}
	}
	name := func(key string) string { return cmp.Or(origin[key], key) }

	for _, k := range keys() {
		raw := v.Get(k.name)
		if k.name == "segment.auto_create" {
			raw = autoCreateValue(raw)
		}
		if err := assign(k.field(&cfg), raw); err != nil {
			errs = append(errs, fmt.Errorf("config: %s: %w", name(k.name), err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return Config{}, err
	}
	if err := cfg.readSecrets(name); err != nil {
		return Config{}, err
	}
	if err := cfg.validate(name); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// unknownEnv refuses the LEAF_* variables that name no key: a mistyped
// LEAF_STORE_DRIVR would otherwise leave the default store in place, a
// fresh database whose IDs start at 1 again. Kubernetes's service links
// (LEAF_SERVICE_HOST, LEAF_PORT_6380_TCP, ... for a Service named leaf)
// are passed over when their values have the shapes Kubernetes gives them.
func unknownEnv(env map[string]string) []error {
	known := make(map[string]bool)
	for _, k := range keys() {
		known[envName(k.name)] = true
	}
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(env)) {
		if known[name] || serviceLink(name, env[name]) {
			continue
		}
		msg := fmt.Sprintf("config: environment variable %s: no such setting", name)
		if s := suggest(strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(name, "LEAF_"), "_", "."))); s != "" {
			msg += fmt.Sprintf(" (did you mean %s?)", envName(s))
		}
		errs = append(errs, errors.New(msg+"; settings are LEAF_<SECTION>_<KEY>, listed by leaf --help"))
	}
	return errs
}

// The variables Kubernetes defines for a Service (named leaf, leaf-server,
// ...) in every pod of its namespace, with the values it gives them.
var (
	linkName  = regexp.MustCompile(`^LEAF[A-Z0-9_]*?_(SERVICE_HOST|SERVICE_PORT(_[A-Z0-9_]+)?|PORT|PORT_[0-9]+_(TCP|UDP|SCTP)(_PROTO|_PORT|_ADDR)?)$`)
	linkValue = map[string]*regexp.Regexp{
		"SERVICE_HOST": regexp.MustCompile(`^[0-9A-Fa-f.:]+$`),
		"SERVICE_PORT": regexp.MustCompile(`^[0-9]+$`),
		"PORT":         regexp.MustCompile(`^(tcp|udp|sctp)://[0-9A-Fa-f.:\[\]]+:[0-9]+$`),
		"_PROTO":       regexp.MustCompile(`^(tcp|udp|sctp)$`),
		"_PORT":        regexp.MustCompile(`^[0-9]+$`),
		"_ADDR":        regexp.MustCompile(`^[0-9A-Fa-f.:]+$`),
	}
)

// serviceLink reports whether name=value is one of Kubernetes's service
// link variables.
func serviceLink(name, value string) bool {
	m := linkName.FindStringSubmatch(name)
	if m == nil {
		return false
	}
	kind := m[1]
	switch {
	case strings.HasPrefix(kind, "SERVICE_PORT"):
		kind = "SERVICE_PORT"
	case m[4] != "":
		kind = m[4]
	case strings.HasPrefix(kind, "PORT_"):
		kind = "PORT"
	}
	return linkValue[kind].MatchString(value)
}

// fileLines maps each key set in the YAML file data (read from path) to
// "path:line: key", for errors; empty without a file.
func fileLines(path string, data []byte) map[string]string {
	origin := make(map[string]string)
	var doc yaml.Node
	if path == "" || yaml.Unmarshal(data, &doc) != nil || len(doc.Content) == 0 {
		return origin
	}
	top := doc.Content[0]
	for i := 0; i+1 < len(top.Content); i += 2 {
		section := top.Content[i+1]
		for j := 0; j+1 < len(section.Content); j += 2 {
			key := strings.ToLower(top.Content[i].Value + "." + section.Content[j].Value)
			origin[key] = fmt.Sprintf("%s:%d: %s", path, section.Content[j].Line, key)
		}
	}
	return origin
}

// Usage returns the help text for program (e.g. "leaf"): how the sources
// combine, and every flag with its default.
func Usage(program string) string {
	fset, _, _, _ := newFlagSet()
	var b strings.Builder
	fmt.Fprintf(&b, "Usage: %s [flags]\n\n", program)
	b.WriteString("leaf hands out unique 64-bit IDs over the Redis protocol.\n\n")
	b.WriteString("Settings come from the defaults below, then the YAML file (--config, or\n")
	b.WriteString("./leaf.yaml if present), then environment variables LEAF_<SECTION>_<KEY>\n")
	b.WriteString("(e.g. LEAF_SERVER_ADDR, LEAF_SEGMENT_LOAD_TIMEOUT), then these flags.\n")
	b.WriteString("Durations are Go durations: 500ms, 2s, 15m, 1h.\n\n")
	b.WriteString("Passwords: a flag is visible to every user of the machine (ps, /proc);\n")
	b.WriteString("give them in server.password_file and server.admin_password_file, in\n")
	b.WriteString("LEAF_SERVER_PASSWORD and LEAF_SERVER_ADMIN_PASSWORD, or in the file.\n\nFlags:\n")
	b.WriteString(fset.FlagUsages())
	return b.String()
}

// flagValue holds a flag's text as given; parsing and its errors happen with
// the other sources' values in assign, so a bad value reads the same wherever
// it came from.
type flagValue struct {
	typ  string // shown in --help: string, bool, int, float, duration
	text string
}

func (f *flagValue) String() string     { return f.text }
func (f *flagValue) Set(s string) error { f.text = s; return nil }
func (f *flagValue) Type() string       { return f.typ }

// newFlagSet defines --config, -h/--help and one flag per key, its default
// shown in --help. raw maps each key to its flag's value.
func newFlagSet() (fset *pflag.FlagSet, raw map[string]*flagValue, configPath *string, help *bool) {
	fset = pflag.NewFlagSet("leaf", pflag.ContinueOnError)
	fset.SortFlags = false
	fset.SetOutput(io.Discard) // Load prints nothing; errors are returned
	fset.Usage = func() {}
	configPath = fset.String("config", "", "YAML configuration file; must exist (default ./leaf.yaml if present)")
	help = fset.BoolP("help", "h", false, "print this help and exit")

	def := Default()
	raw = make(map[string]*flagValue)
	for _, k := range keys() {
		typ, text := describe(k.field(&def))
		fv := &flagValue{typ: typ, text: text}
		raw[k.name] = fv
		fl := fset.VarPF(fv, k.name, "", k.usage)
		if typ == "bool" {
			fl.NoOptDefVal = "true" // --segment.auto_create means =true
		}
	}
	return fset, raw, configPath, help
}

// flagError prefixes a pflag error and, for an unknown flag, suggests the
// closest key.
func flagError(err error) error {
	if nf, ok := errors.AsType[*pflag.NotExistError](err); ok {
		if s := suggest(nf.GetSpecifiedName()); s != "" {
			return fmt.Errorf("config: %w (did you mean --%s?)", err, s)
		}
	}
	return fmt.Errorf("config: %w", err)
}

// envMap picks the LEAF_* variables out of environ; the last of a repeated
// name wins, as with exec.Cmd.Env.
func envMap(environ []string) map[string]string {
	m := make(map[string]string)
	for _, kv := range environ {
		name, val, ok := strings.Cut(kv, "=")
		if ok && strings.HasPrefix(name, "LEAF_") {
			m[name] = val
		}
	}
	return m
}

// readFile parses the YAML file into v and rejects what is not a known key.
// It runs before any default is set, so v.AllKeys is the file's keys alone.
func readFile(v *viper.Viper, path string, data []byte) error {
	v.SetConfigType("yaml")
	if err := v.ReadConfig(bytes.NewReader(data)); err != nil {
		if pe, ok := errors.AsType[viper.ConfigParseError](err); ok {
			err = pe.Unwrap() // drop viper's "While parsing config:"
		}
		return fmt.Errorf("config: %s: %w", path, err)
	}
	known := make(map[string]bool)
	for _, k := range keys() {
		known[k.name] = true
	}
	isSection := make(map[string]bool)
	for _, s := range sections() {
		isSection[s] = true
	}
	var errs []error
	for _, name := range sortedKeys(v.AllKeys()) {
		val := v.Get(name)
		switch {
		case isSection[name]:
			// "server:" with nothing under it is an empty section: fine.
			if val != nil {
				errs = append(errs, fmt.Errorf("config: %s: %s: must be a section of keys, got %v", path, name, val))
			}
		case !known[name]:
			msg := fmt.Sprintf("config: %s: unknown key %q", path, name)
			if s := suggest(name); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			}
			errs = append(errs, errors.New(msg))
		case val == nil:
			errs = append(errs, fmt.Errorf(`config: %s: %s: no value (write "" for an empty string, or remove the line for the default)`, path, name))
		}
	}
	return errors.Join(errs...)
}

// sortedKeys returns the names in leaf.yaml's key order, unknown ones last
// in alphabetical order, so errors come out in a stable order.
func sortedKeys(names []string) []string {
	order := make(map[string]int)
	for i, k := range keys() {
		order[k.name] = i
	}
	rank := func(s string) int {
		if i, ok := order[s]; ok {
			return i
		}
		return len(order)
	}
	out := slices.Clone(names)
	slices.SortFunc(out, func(a, b string) int {
		return cmp.Or(cmp.Compare(rank(a), rank(b)), strings.Compare(a, b))
	})
	return out
}

// suggest returns the known key closest to name, or "" when none is close.
func suggest(name string) string {
	best, bestDist := "", 4 // at most 3 edits
	for _, k := range keys() {
		if d := editDistance(strings.ToLower(name), k.name); d < bestDist {
			best, bestDist = k.name, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
