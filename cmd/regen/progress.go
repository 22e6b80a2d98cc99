package main

import (
	"io"

	"github.com/schollz/progressbar/v3"
)

// progress is a progress bar (github.com/schollz/progressbar/v3) redrawn
// in place on one line: percent, bar, done/total count, elapsed time, and
// a description of the state after it.
type progress struct{ bar *progressbar.ProgressBar }

func newProgress(w io.Writer) *progress {
	return &progress{bar: progressbar.NewOptions64(1,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetWidth(30),
		progressbar.OptionShowCount(),
		progressbar.OptionSetElapsedTime(true),
		// The servers predict the time left better than the bar's rate.
		progressbar.OptionSetPredictTime(false),
		progressbar.OptionShowDescriptionAtLineEnd(),
	)}
}

// describe changes the line beside the bar, which stays where it is.
func (p *progress) describe(desc string) { p.bar.Describe(desc) }

// set shows done of total with desc. The bar stays short of full until
// finish: once full, progressbar draws no more, and a watch is not over
// while total may still grow (another failure, another shard placed).
// Each progressbar call redraws, so only what changed is passed on.
func (p *progress) set(done, total int64, desc string) {
	total = max(total, 1)
	done = min(max(done, 0), total-1)
	if total != p.bar.GetMax64() {
		p.bar.ChangeMax64(total)
	}
	if done != p.bar.State().CurrentNum {
		p.bar.Set64(done)
	}
	p.bar.Describe(desc)
}

// finish draws the full bar with desc and ends its line.
func (p *progress) finish(w io.Writer, desc string) {
	p.bar.Finish()
	p.bar.Describe(desc)
	io.WriteString(w, "\n")
}
