package config

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"
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
// "config: " and names the key, flag or file at fault; several errors are
// joined into one.
func Load(args []string, environ []string) (Config, error) {
	fset, settings, configPath, help := newFlagSet()
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
	path, explicit := *configPath, fset.Changed("config")
	if explicit && path == "" {
		return Config{}, errors.New("config: --config: empty path")
	}
	if !explicit {
		path = ImplicitFile
	}
	file := ""
	data, err := os.ReadFile(path)
	switch {
	case err == nil:
		v.SetConfigType("yaml")
		if err := v.ReadConfig(bytes.NewReader(data)); err != nil {
			if pe, ok := errors.AsType[viper.ConfigParseError](err); ok {
				err = pe.Unwrap() // drop viper's "While parsing config:"
			}
			return Config{}, fmt.Errorf("config: %s: %w", path, err)
		}
		file = path
	case !explicit && errors.Is(err, fs.ErrNotExist):
		// No ./leaf.yaml: defaults, environment and flags only.
	case explicit:
		return Config{}, fmt.Errorf("config: --config: %w", err)
	default:
		return Config{}, fmt.Errorf("config: %w", err)
	}
	errs := noValues(v, file)

	// origin remembers who set each key, so that an error names what the
	// user wrote: the file's line, the variable or the flag.
	env := envMap(environ)
	errs = append(errs, unknownEnv(env)...)
	origin := fileLines(file, data)
	envLayer := make(map[string]any)
	for _, k := range keys() {
		if val, ok := env[envName(k.name)]; ok {
			sec, name, _ := strings.Cut(k.name, ".")
			if envLayer[sec] == nil {
				envLayer[sec] = make(map[string]any)
			}
			envLayer[sec].(map[string]any)[name] = val
			origin[k.name] = envName(k.name) + " (" + k.name + ")"
		}
		if fset.Changed(k.name) {
			origin[k.name] = "--" + k.name
		}
	}
	// The environment is given, not read (viper's AutomaticEnv reads the
	// process's, which tests cannot set in parallel): merged over the
	// file's values, it sits where AutomaticEnv would, under the flags.
	if err := v.MergeConfigMap(envLayer); err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	// The flags, set or not: an unset one gives its default, Default's.
	if err := v.BindPFlags(settings); err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	v.Set("segment.auto_create", autoCreateValue(v.Get("segment.auto_create")))

	var cfg Config
	if err := v.UnmarshalExact(&cfg, decoding); err != nil {
		errs = append(errs, decodeErrors(err, v, file, origin)...)
	}
	if err := errors.Join(errs...); err != nil {
		return Config{}, err
	}
	cfg.File = file
	name := func(key string) string { return cmp.Or(origin[key], key) }
	if err := cfg.readSecrets(name); err != nil {
		return Config{}, err
	}
	if err := cfg.validate(name); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// decoding sets how viper's values become Config's fields. Not weakly
// typed: YAML turns an unquoted 0123 into 83, and a password or a path
// must not take it. Text (the environment, the flags, quoted YAML) is
// parsed by mapstructure's hooks, blanks around it ignored; a number is a
// duration only when it is 0, and an integer only when it is whole (YAML
// reads 1e6 as a float).
func decoding(c *mapstructure.DecoderConfig) {
	c.WeaklyTypedInput = false
	c.DecodeHook = mapstructure.ComposeDecodeHookFunc(
		func(f, t reflect.Type, data any) (any, error) {
			if f.Kind() == reflect.String && t.Kind() != reflect.String {
				return strings.TrimSpace(data.(string)), nil
			}
			return data, nil
		},
		mapstructure.StringToTimeDurationHookFunc(),
		func(f, t reflect.Type, data any) (any, error) {
			if t != reflect.TypeFor[time.Duration]() || f == t || f.Kind() == reflect.String {
				return data, nil
			}
			if n, ok := data.(int); ok && n == 0 {
				return time.Duration(0), nil
			}
			return nil, errors.New("a duration needs a unit")
		},
		// Integers in text are decimal, as they always were here: 010
		// is ten, not eight as Go's parsers with base 0 would read it.
		func(f, t reflect.Type, data any) (any, error) {
			if f.Kind() != reflect.String || (t.Kind() != reflect.Int && t.Kind() != reflect.Int64) ||
				t == reflect.TypeFor[time.Duration]() {
				return data, nil
			}
			n, err := strconv.ParseInt(data.(string), 10, 64)
			if err != nil {
				return nil, fmt.Errorf("not a whole number: %q", data)
			}
			return n, nil
		},
		mapstructure.StringToBasicTypeHookFunc(),
		func(f, t reflect.Type, data any) (any, error) {
			if f.Kind() != reflect.Float64 || (t.Kind() != reflect.Int && t.Kind() != reflect.Int64) {
				return data, nil
			}
			if x := data.(float64); x == math.Trunc(x) && x >= math.MinInt64 && x < math.MaxInt64 {
				return int64(x), nil
			}
			return nil, errors.New("not a whole number")
		},
	)
}

// decodeErrors turns mapstructure's errors into leaf's: an unknown key in
// the file, with the closest known one; a section that is not one; a value
// that is not of its key's type, named by where it was set.
func decodeErrors(err error, v *viper.Viper, file string, origin map[string]string) []error {
	type keyErr struct {
		key string
		err error
	}
	var out []keyErr
	unknown := func(name string) {
		// A key under an unknown name is named whole: segments.loaders.
		for _, k := range v.AllKeys() {
			if (k == name || strings.HasPrefix(k, name+".")) && !known(k) {
				out = append(out, keyErr{k, unknownKey(file, k)})
			}
		}
	}
	for _, de := range decodeLeaves(err) {
		key, cause := de.Name(), de.Unwrap()
		raw := v.Get(key)
		if list, ok := strings.CutPrefix(cause.Error(), "has invalid keys: "); ok {
			for k := range strings.SplitSeq(list, ", ") {
				unknown(strings.TrimPrefix(key+"."+k, "."))
			}
			continue
		}
		if slices.Contains(sections(), key) {
			out = append(out, keyErr{key, fmt.Errorf("config: %s: %s: must be a section of keys, got %v", file, key, raw)})
			continue
		}
		out = append(out, keyErr{key, fmt.Errorf("config: %s: %s", cmp.Or(origin[key], key), badValue(key, raw))})
	}
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
	slices.SortStableFunc(out, func(a, b keyErr) int {
		return cmp.Or(cmp.Compare(rank(a.key), rank(b.key)), strings.Compare(a.key, b.key))
	})
	errs := make([]error, 0, len(out))
	for _, e := range out {
		errs = append(errs, e.err)
	}
	return errs
}

// decodeLeaves returns the innermost of mapstructure's errors in err: one
// per key at fault.
func decodeLeaves(err error) []*mapstructure.DecodeError {
	var inner []error
	switch e := err.(type) {
	case interface{ Unwrap() []error }:
		inner = e.Unwrap()
	case interface{ Unwrap() error }:
		inner = []error{e.Unwrap()}
	}
	var out []*mapstructure.DecodeError
	for _, e := range inner {
		out = append(out, decodeLeaves(e)...)
	}
	if de, ok := err.(*mapstructure.DecodeError); ok && len(out) == 0 {
		out = append(out, de)
	}
	return out
}

// badValue says what the value raw of key should have been.
func badValue(key string, raw any) string {
	text := fmt.Sprint(raw)
	var def Config
	for _, k := range keys() {
		if k.name != key {
			continue
		}
		switch k.field(&def).Interface().(type) {
		case string:
			return fmt.Sprintf("want a string, got %T %v (quote it)", raw, raw)
		case bool:
			return fmt.Sprintf("invalid boolean %q (want true or false)", text)
		case int, int64:
			return fmt.Sprintf("invalid integer %q", text)
		case float64:
			return fmt.Sprintf("invalid number %q", text)
		case time.Duration:
			return fmt.Sprintf("invalid duration %q", text)
		}
	}
	return fmt.Sprintf("invalid value %q", text)
}

// noValues refuses the file's keys written with no value, which viper
// would pass over for the default, and keys under a key, which it would
// decode as an empty value. v holds the file alone.
func noValues(v *viper.Viper, file string) []error {
	var errs []error
	for _, name := range v.AllKeys() {
		parts := strings.SplitN(name, ".", 3)
		switch {
		case len(parts) == 3 && known(parts[0]+"."+parts[1]):
			// server.addr.host: a key holds a value, not keys.
			errs = append(errs, unknownKey(file, name))
		case v.Get(name) != nil || slices.Contains(sections(), name):
			// "server:" with nothing under it is an empty section: fine.
		case !known(name):
			errs = append(errs, unknownKey(file, name))
		default:
			errs = append(errs, fmt.Errorf(`config: %s: %s: no value (write "" for an empty string, or remove the line for the default)`, file, name))
		}
	}
	return errs
}

// known reports whether name is a key.
func known(name string) bool {
	return slices.ContainsFunc(keys(), func(k key) bool { return k.name == name })
}

// unknownKey is the error of a key of the file that leaf does not know.
func unknownKey(file, name string) error {
	msg := fmt.Sprintf("config: %s: unknown key %q", file, name)
	if s := suggest(name); s != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", s)
	}
	return errors.New(msg)
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

// IsBoolFlag reports whether name ("store.create_schema") is a boolean
// setting, whose flag takes no separate value word.
func IsBoolFlag(name string) bool {
	_, settings, _, _ := newFlagSet()
	f := settings.Lookup(name)
	return f != nil && f.Value.Type() == "bool"
}

// newFlagSet defines --config, -h/--help and, in settings, one flag per
// key of its field's type, with Default's value as its default.
func newFlagSet() (fset, settings *pflag.FlagSet, configPath *string, help *bool) {
	fset = pflag.NewFlagSet("leaf", pflag.ContinueOnError)
	fset.SortFlags = false
	fset.SetOutput(io.Discard) // Load prints nothing; errors are returned
	fset.Usage = func() {}
	configPath = fset.String("config", "", "YAML configuration file; must exist (default ./leaf.yaml if present)")
	help = fset.BoolP("help", "h", false, "print this help and exit")

	settings = pflag.NewFlagSet("settings", pflag.ContinueOnError)
	settings.SortFlags = false
	def := Default()
	for _, k := range keys() {
		switch d := k.field(&def).Interface().(type) {
		case string:
			settings.String(k.name, d, k.usage)
		case bool:
			settings.Bool(k.name, d, k.usage)
		case int:
			v := decimal(d)
			settings.Var(&v, k.name, k.usage)
			settings.Lookup(k.name).DefValue = v.String()
		case int64:
			v := decimal(d)
			settings.Var(&v, k.name, k.usage)
			settings.Lookup(k.name).DefValue = v.String()
		case float64:
			settings.Float64(k.name, d, k.usage)
		case time.Duration:
			settings.Duration(k.name, d, k.usage)
			settings.Lookup(k.name).DefValue = formatDuration(d) // 15m, not 15m0s
		default:
			panic(fmt.Sprintf("config: %s: field of unsupported type %T", k.name, d))
		}
	}
	fset.AddFlagSet(settings)
	return fset, settings, configPath, help
}

// flagError prefixes a pflag error; for an unknown flag it suggests the
// closest key, for a bad value it reads as the other sources' do.
func flagError(err error) error {
	if nf, ok := errors.AsType[*pflag.NotExistError](err); ok {
		if s := suggest(nf.GetSpecifiedName()); s != "" {
			return fmt.Errorf("config: %w (did you mean --%s?)", err, s)
		}
	}
	if iv, ok := errors.AsType[*pflag.InvalidValueError](err); ok {
		return fmt.Errorf("config: --%s: %s", iv.GetFlag().Name, badValue(iv.GetFlag().Name, iv.GetValue()))
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

// decimal is an integer flag read in base 10 (pflag's Int reads 010 as
// eight); it shows as int in --help, and viper reads its value back in
// base 10.
type decimal int64

func (d *decimal) String() string { return strconv.FormatInt(int64(*d), 10) }
func (d *decimal) Type() string   { return "int" }

func (d *decimal) Set(s string) error {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil {
		return errors.New("not a whole number")
	}
	*d = decimal(n)
	return nil
}
