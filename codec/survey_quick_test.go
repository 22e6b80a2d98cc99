package codec

import (
	"context"
	"testing"
	"time"
)

func TestQuickSurvey(t *testing.T) {
	for _, tc := range []struct {
		name   string
		ts     []int
		sample int
	}{
		{"pm-8-8", []int{1, 2, 3, 4}, 0}, {"pm-10-10", []int{2, 3}, 0},
		{"clay-4-2", []int{1, 2}, 0}, {"clay-6-3", []int{1, 2, 3}, 0}, {"clay-8-4", []int{1, 2, 3, 4}, 0},
		{"clay-8-8", []int{1, 2, 3, 4}, 30}, {"clay-10-10", []int{1, 2, 3, 4}, 20}, {"clay-10-4", []int{1, 2}, 10},
	} {
		c, _ := Parse(tc.name)
		st := time.Now()
		rows, err := Survey(context.Background(), c.(Regenerating), SurveyOptions{Failures: tc.ts, Sample: tc.sample, Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			t.Logf("%+v", r)
		}
		t.Log(time.Since(st))
	}
}
