package main

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
)

// regen chaos refuses settings the checker or the codes cannot honour,
// before starting anything, as usage errors naming the flag.
func TestChaosOptions(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--max-down", "4"}, "--max-down"},
		{[]string{"--keys", "1"}, "--keys"},
		{[]string{"--shards", "8"}, "--shards"},
		{[]string{"--duration", "0s"}, "--duration"},
		{[]string{"--seed", "-1"}, "--seed"},
	} {
		err := runChaos(context.Background(), c.args, io.Discard)
		var ue usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: got %v, want a usage error about %s", c.args, err, c.want)
		}
	}
}
