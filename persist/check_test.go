package persist_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/leaf-id/leaf/persist"
)

// The checks every backend runs: limits count characters, as VARCHAR does,
// and every refusal wraps ErrInvalid.
func TestChecks(t *testing.T) {
	tests := []struct {
		name string
		err  error
		ok   bool
	}{
		{"Tag", persist.CheckTag("order"), true},
		{"TagOfMaxCharacters", persist.CheckTag(strings.Repeat("é", persist.MaxTagLen)), true},
		{"TagEmpty", persist.CheckTag(""), false},
		{"TagTooLong", persist.CheckTag(strings.Repeat("x", persist.MaxTagLen+1)), false},
		{"TagNotUTF8", persist.CheckTag("\xff"), false},
		{"TagWithNUL", persist.CheckTag("a\x00b"), false},
		{"TagEndingInSpace", persist.CheckTag("a "), false},
		{"Step1", persist.CheckStep(1), true},
		{"StepMax", persist.CheckStep(persist.MaxStep), true},
		{"Step0", persist.CheckStep(0), false},
		{"StepAboveMax", persist.CheckStep(persist.MaxStep + 1), false},
		{"Description", persist.CheckDescription(""), true},
		{"DescriptionOfMaxCharacters", persist.CheckDescription(strings.Repeat("é", persist.MaxDescriptionLen)), true},
		{"DescriptionTooLong", persist.CheckDescription(strings.Repeat("x", persist.MaxDescriptionLen+1)), false},
		{"DescriptionNotUTF8", persist.CheckDescription("\xff"), false},
		{"DescriptionWithNUL", persist.CheckDescription("\x00"), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			switch {
			case tc.ok && tc.err != nil:
				t.Errorf("refused: %v", tc.err)
			case !tc.ok && !errors.Is(tc.err, persist.ErrInvalid):
				t.Errorf("err = %v, want ErrInvalid", tc.err)
			}
		})
	}
}
