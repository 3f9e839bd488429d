package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// assign converts raw into the field p points to. raw is a default (already
// of the field's type), a value decoded from YAML (string, int, float64,
// bool, ...) or the text of an environment variable or a flag. The error
// names the value but not the key; the caller adds the key.
func assign(p any, raw any) error {
	switch p := p.(type) {
	case *string:
		s, ok := raw.(string)
		if !ok {
			// YAML turns an unquoted 0123 into 83 and 1e3 into 1000:
			// a password or a path must be written as a string.
			return fmt.Errorf("want a string, got %T %v (quote it)", raw, raw)
		}
		*p = s
	case *bool:
		b, err := toBool(raw)
		if err != nil {
			return err
		}
		*p = b
	case *int:
		n, err := toInt(raw)
		if err != nil {
			return err
		}
		if n != int64(int(n)) { // only where int is 32 bits
			return fmt.Errorf("invalid integer %q: out of range", text(raw))
		}
		*p = int(n)
	case *int64:
		n, err := toInt(raw)
		if err != nil {
			return err
		}
		*p = n
	case *float64:
		f, err := toFloat(raw)
		if err != nil {
			return err
		}
		*p = f
	case *time.Duration:
		d, err := toDuration(raw)
		if err != nil {
			return err
		}
		*p = d
	default:
		panic(fmt.Sprintf("config: field of unsupported type %T", p))
	}
	return nil
}

// text is raw as the user wrote it, near enough, for error messages.
func text(raw any) string {
	if s, ok := raw.(string); ok {
		return s
	}
	return fmt.Sprint(raw)
}

func toBool(raw any) (bool, error) {
	switch v := raw.(type) {
	case bool:
		return v, nil
	case string:
		if b, err := strconv.ParseBool(strings.TrimSpace(v)); err == nil {
			return b, nil
		}
	}
	return false, fmt.Errorf("invalid boolean %q (want true or false)", text(raw))
}

func toInt(raw any) (int64, error) {
	switch v := raw.(type) {
	case int:
		return int64(v), nil
	case int64:
		return v, nil
	case uint64:
		if v <= math.MaxInt64 {
			return int64(v), nil
		}
	case float64: // YAML reads 1e6 as a float
		if v == math.Trunc(v) && v >= math.MinInt64 && v < math.MaxInt64 {
			return int64(v), nil
		}
	case string:
		if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
			return n, nil
		}
	}
	return 0, fmt.Errorf("invalid integer %q", text(raw))
}

func toFloat(raw any) (float64, error) {
	switch v := raw.(type) {
	case float64:
		return v, nil
	case int:
		return float64(v), nil
	case int64:
		return float64(v), nil
	case string:
		if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
			return f, nil
		}
	}
	return 0, fmt.Errorf("invalid number %q", text(raw))
}

func toDuration(raw any) (time.Duration, error) {
	switch v := raw.(type) {
	case time.Duration:
		return v, nil
	case string, int: // a bare 0 is fine; any other bare number lacks a unit
		if d, err := time.ParseDuration(strings.TrimSpace(text(v))); err == nil {
			return d, nil
		}
	}
	return 0, fmt.Errorf("invalid duration %q", text(raw))
}

// describe returns a field's flag type name for --help and its value as
// text, in the form leaf.yaml and the flags accept.
func describe(p any) (typ, s string) {
	switch p := p.(type) {
	case *string:
		return "string", *p
	case *bool:
		return "bool", strconv.FormatBool(*p)
	case *int:
		return "int", strconv.Itoa(*p)
	case *int64:
		return "int", strconv.FormatInt(*p, 10)
	case *float64:
		return "float", strconv.FormatFloat(*p, 'g', -1, 64)
	case *time.Duration:
		return "duration", formatDuration(*p)
	}
	panic(fmt.Sprintf("config: field of unsupported type %T", p))
}

// formatDuration writes d without zero tails: 15m, not 15m0s; 1h, not
// 1h0m0s; 0, not 0s.
func formatDuration(d time.Duration) string {
	if d == 0 {
		return "0" // as leaf.yaml writes it; --help hides a zero default
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
