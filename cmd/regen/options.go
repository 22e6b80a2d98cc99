package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/regen-s3/regen/internal/netlimit"
)

// options.go is the one place where command-line flags and REGEN_*
// environment variables become values. Every command declares its options
// on an optionSet, each with its flag name, its variable and the default
// that command really uses; Parse then reads the flags, fills every option
// not given as a flag from its variable, and runs the command's Validate.
// A value that does not parse or validate is a usage error naming both the
// flag and the variable, wherever it came from: nothing is silently
// replaced by a default.
//
// To add an option: pick the typed method (String, Duration, Int, Size,
// Rate, Bool, List), give it the flag name, its variable (REGEN_ and the
// flag's name in upper case with underscores, e.g. --repair-grace and
// REGEN_REPAIR_GRACE; "" for flag-only options) and the default; range
// checks go in the command's Validate as badOption errors, so they are
// reported the same way.

// optionSet is one command's options.
type optionSet struct {
	cmd     string // "dev", "admin drain", ...
	summary string // one line shown above the flags in help
	args    string // positional arguments in the usage line, e.g. "NODE"
	fs      *flag.FlagSet
	opts    []*option
	byName  map[string]*option
	help    io.Writer // where -h prints; os.Stdout unless a test sets it
}

// option is one flag and the variables that may set it.
type option struct {
	name  string
	envs  []string // read in order when the flag is not given; may be empty
	value flag.Value
	kind  string // what help says the value is: "duration", "size", ...
	usage string
	def   string // default as help shows it

	// What set it, for error messages: "flag" or the variable's name.
	from string
	raw  string
	err  error // the last Set error, clearer than the flag package's
}

// newOptionSet starts the options of a command.
func newOptionSet(cmd, summary string) *optionSet {
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // Parse reports errors; help is printed by printHelp
	fs.Usage = func() {}
	return &optionSet{cmd: cmd, summary: summary, fs: fs, byName: map[string]*option{}, help: os.Stdout}
}

func (o *optionSet) add(name, env string, v flag.Value, kind, usage string) *option {
	if _, dup := o.byName[name]; dup {
		panic("option --" + name + " declared twice")
	}
	opt := &option{name: name, value: v, kind: kind, usage: usage, def: v.String()}
	if env != "" {
		opt.envs = []string{env}
	}
	w := &checkedValue{opt: opt, v: v}
	o.fs.Var(w, name, usage)
	o.opts = append(o.opts, opt)
	o.byName[name] = opt
	return opt
}

// alsoEnv makes more variables set the option, read after its own (the
// admin credentials also come from AWS_ACCESS_KEY_ID and friends).
func (opt *option) alsoEnv(names ...string) *option {
	opt.envs = append(opt.envs, names...)
	return opt
}

// showDefault replaces the default help shows (for defaults that depend on
// other options).
func (opt *option) showDefault(s string) *option {
	opt.def = s
	return opt
}

// String declares a string option.
func (o *optionSet) String(p *string, name, env, def, usage string) *option {
	*p = def
	return o.add(name, env, (*stringValue)(p), "string", usage)
}

// Duration declares a duration option (30s, 10m, 1h30m).
func (o *optionSet) Duration(p *time.Duration, name, env string, def time.Duration, usage string) *option {
	*p = def
	return o.add(name, env, (*durationValue)(p), "duration", usage)
}

// Int declares an integer option.
func (o *optionSet) Int(p *int, name, env string, def int, usage string) *option {
	*p = def
	return o.add(name, env, (*intValue)(p), "int", usage)
}

// Size declares a byte count that takes units: 1048576, 64KiB, 1MiB, 125MB.
func (o *optionSet) Size(p *int64, name, env string, def int64, usage string) *option {
	*p = def
	return o.add(name, env, (*sizeValue)(p), "size", usage)
}

// Rate declares a bytes-per-second option that takes units: 8MiB, 8MiB/s,
// 125MB, 1Gbit; 0 usually means unlimited or off.
func (o *optionSet) Rate(p *int64, name, env string, def int64, usage string) *option {
	*p = def
	return o.add(name, env, (*rateValue)(p), "rate", usage)
}

// Bool declares a boolean option (--json, or --json=false).
func (o *optionSet) Bool(p *bool, name, env string, def bool, usage string) *option {
	*p = def
	return o.add(name, env, (*boolValue)(p), "", usage)
}

// List declares a repeatable option whose values may also be
// comma-separated (the variable always is).
func (o *optionSet) List(p *listFlag, name, env string, def []string, usage string) *option {
	*p = append(listFlag(nil), def...)
	return o.add(name, env, &listValue{p: p, def: true}, "list", usage)
}

// Given reports whether the user set the option, by flag or variable.
func (o *optionSet) Given(name string) bool {
	opt := o.byName[name]
	return opt != nil && opt.from != ""
}

// Parse reads args (flags only), then the variables of the options no flag
// set, then runs validate (nil: none). It returns flag.ErrHelp after
// printing help for -h, and a usageError naming flag and variable for any
// bad value.
func (o *optionSet) Parse(args []string, validate func() error) error {
	pos, err := o.ParseArgs(args, validate)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageErrorf("unexpected arguments: %v (run 'regen %s -h')", pos, o.cmd)
	}
	return nil
}

// ParseArgs is Parse for commands with positional arguments, which may
// come before, between or after the flags; it returns them.
func (o *optionSet) ParseArgs(args []string, validate func() error) ([]string, error) {
	var pos []string
	for {
		if err := o.fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				o.printHelp(o.help)
				return nil, err
			}
			for _, opt := range o.opts {
				if opt.err != nil {
					return nil, usageErrorf("%s (run 'regen %s -h')", opt.describe(opt.err), o.cmd)
				}
			}
			return nil, usageErrorf("%v (run 'regen %s -h')", err, o.cmd)
		}
		if o.fs.NArg() == 0 {
			break
		}
		pos = append(pos, o.fs.Arg(0))
		args = o.fs.Args()[1:]
	}
	o.fs.Visit(func(f *flag.Flag) { o.byName[f.Name].from = "flag" })
	for _, opt := range o.opts {
		if opt.from != "" {
			continue
		}
		for _, env := range opt.envs {
			v, ok := os.LookupEnv(env)
			if !ok || v == "" {
				continue
			}
			opt.from, opt.raw = env, v
			if lv, ok := opt.value.(*listValue); ok {
				lv.def = true // a variable replaces the default list, like a flag
			}
			if err := opt.value.Set(v); err != nil {
				return nil, usageErrorf("%s (run 'regen %s -h')", opt.describe(err), o.cmd)
			}
			break
		}
	}
	if validate != nil {
		if err := validate(); err != nil {
			return nil, o.explain(err)
		}
	}
	return pos, nil
}

// optionError is a Validate failure of one option.
type optionError struct {
	name string // flag name without dashes
	msg  string
}

func (e *optionError) Error() string { return "--" + e.name + ": " + e.msg }

// badOption is how a command config's Validate reports a bad option.
func badOption(name, format string, a ...any) error {
	return &optionError{name: name, msg: fmt.Sprintf(format, a...)}
}

// explain turns a Validate error into a usage error that says where the
// bad value came from.
func (o *optionSet) explain(err error) error {
	var oe *optionError
	if errors.As(err, &oe) {
		if opt := o.byName[oe.name]; opt != nil {
			if opt.raw == "" && opt.from == "" {
				opt.raw = opt.value.String()
			}
			return usageErrorf("%s (run 'regen %s -h')", opt.describe(errors.New(oe.msg)), o.cmd)
		}
	}
	var ue usageError
	if errors.As(err, &ue) {
		return err
	}
	return usageError{err}
}

// describe says which flag and variable a bad value belongs to, and where
// it came from.
func (opt *option) describe(err error) string {
	vars := ""
	if len(opt.envs) > 0 {
		vars = strings.Join(opt.envs, " or ")
	}
	switch {
	case opt.from != "" && opt.from != "flag":
		return fmt.Sprintf("%s=%q (the variable of --%s): %v", opt.from, opt.raw, opt.name, err)
	case opt.from == "flag" && vars != "":
		return fmt.Sprintf("--%s %q (also settable as %s): %v", opt.name, opt.raw, vars, err)
	case opt.from == "flag":
		return fmt.Sprintf("--%s %q: %v", opt.name, opt.raw, err)
	case vars != "":
		return fmt.Sprintf("--%s (%s) default %q: %v", opt.name, vars, opt.raw, err)
	}
	return fmt.Sprintf("--%s default %q: %v", opt.name, opt.raw, err)
}

// checkedValue records what a flag was set to and why it failed, so the
// error names the option and its variable instead of the flag package's
// "invalid value ... for flag -x".
type checkedValue struct {
	opt *option
	v   flag.Value
}

func (c *checkedValue) String() string {
	if c == nil || c.v == nil {
		return ""
	}
	return c.v.String()
}

func (c *checkedValue) Set(s string) error {
	c.opt.from, c.opt.raw = "flag", s
	err := c.v.Set(s)
	c.opt.err = err
	return err
}

// IsBoolFlag lets --json stand alone.
func (c *checkedValue) IsBoolFlag() bool {
	_, ok := c.v.(*boolValue)
	return ok
}

// printHelp prints the usage line and every option with its variable and
// the default this command uses.
func (o *optionSet) printHelp(w io.Writer) {
	line := "usage: regen " + o.cmd + " [flags]"
	if o.args != "" {
		line += " " + o.args
	}
	fmt.Fprintln(w, line)
	if o.summary != "" {
		fmt.Fprintf(w, "\n%s\n", o.summary)
	}
	if len(o.opts) == 0 {
		return
	}
	fmt.Fprintln(w, "\nflags (a flag wins over its environment variable):")
	opts := append([]*option(nil), o.opts...)
	sort.Slice(opts, func(i, j int) bool { return opts[i].name < opts[j].name })
	for _, opt := range opts {
		head := "  --" + opt.name
		if opt.kind != "" {
			head += " " + opt.kind
		}
		var extra []string
		if len(opt.envs) > 0 {
			extra = append(extra, "env "+strings.Join(opt.envs, ", "))
		}
		if opt.def != "" && opt.def != "false" {
			extra = append(extra, "default "+opt.def)
		}
		fmt.Fprintln(w, head)
		text := opt.usage
		if len(extra) > 0 {
			text += " [" + strings.Join(extra, "; ") + "]"
		}
		fmt.Fprintf(w, "        %s\n", text)
	}
}

// The value types. Each one's String is also how dev passes the value on to
// its shard servers, so it must parse back.

type stringValue string

func (v *stringValue) Set(s string) error { *v = stringValue(s); return nil }
func (v *stringValue) String() string {
	if v == nil {
		return ""
	}
	return string(*v)
}

type durationValue time.Duration

func (v *durationValue) Set(s string) error {
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return errors.New("want a duration with a unit, e.g. 500ms, 30s, 10m, 1h30m")
	}
	*v = durationValue(d)
	return nil
}

func (v *durationValue) String() string {
	if v == nil {
		return ""
	}
	return fmtDuration(time.Duration(*v))
}

// fmtDuration writes 10m rather than 10m0s.
func fmtDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

type intValue int

func (v *intValue) Set(s string) error {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		return errors.New("want a whole number")
	}
	*v = intValue(n)
	return nil
}

func (v *intValue) String() string {
	if v == nil {
		return ""
	}
	return strconv.Itoa(int(*v))
}

type sizeValue int64

func (v *sizeValue) Set(s string) error {
	n, err := parseSize(s)
	if err != nil {
		return err
	}
	*v = sizeValue(n)
	return nil
}

func (v *sizeValue) String() string {
	if v == nil {
		return ""
	}
	return fmtSize(int64(*v))
}

type rateValue int64

func (v *rateValue) Set(s string) error {
	n, err := parseRate(s)
	if err != nil {
		return err
	}
	*v = rateValue(n)
	return nil
}

func (v *rateValue) String() string {
	if v == nil {
		return ""
	}
	if *v == 0 {
		return "0"
	}
	return fmtSize(int64(*v)) + "/s"
}

type boolValue bool

func (v *boolValue) Set(s string) error {
	b, err := strconv.ParseBool(strings.TrimSpace(s))
	if err != nil {
		return errors.New("want true or false")
	}
	*v = boolValue(b)
	return nil
}

func (v *boolValue) String() string {
	if v == nil {
		return ""
	}
	return strconv.FormatBool(bool(*v))
}

// listValue is a listFlag whose default is replaced, not appended to, by
// the first value given.
type listValue struct {
	p   *listFlag
	def bool // *p still holds the default
}

func (v *listValue) Set(s string) error {
	if v.def {
		*v.p, v.def = nil, false
	}
	return v.p.Set(s)
}

func (v *listValue) String() string {
	if v == nil || v.p == nil {
		return ""
	}
	return v.p.String()
}

// parseSize reads sizes like 1048576, 64KiB, 1MiB, 125MB, 2G (K, M, G, T
// alone are binary).
func parseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	units := []struct {
		suffix string
		mult   int64
	}{
		{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
		{"KB", 1000}, {"MB", 1000 * 1000}, {"GB", 1000 * 1000 * 1000}, {"TB", 1000 * 1000 * 1000 * 1000},
		{"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"T", 1 << 40}, {"B", 1},
	}
	mult := int64(1)
	for _, u := range units {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseFloat(t, 64)
	// NB: !(n >= 0) also refuses NaN, which ParseFloat accepts.
	if err != nil || !(n >= 0) || n*float64(mult) > 1<<62 {
		return 0, fmt.Errorf("want a size such as 1048576, 64KiB, 1MiB or 125MB")
	}
	return int64(n * float64(mult)), nil
}

// parseRate reads bytes per second: a size with an optional "/s" (8MiB,
// 8MiB/s, 125MB), or bits (100Mbit, 1Gbit).
func parseRate(s string) (int64, error) {
	t := strings.TrimSuffix(strings.TrimSpace(s), "/s")
	if n, err := parseSize(t); err == nil {
		return n, nil
	}
	if n, err := netlimit.ParseRate(s); err == nil {
		return n, nil
	}
	return 0, fmt.Errorf("want bytes per second such as 8MiB, 125MB/s or 1Gbit; 0 for none")
}

// fmtSize writes n in the largest binary unit that divides it (8MiB), else
// in decimal units (125MB), else in bytes; parseSize reads it back.
func fmtSize(n int64) string {
	for _, u := range []struct {
		name string
		mult int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10},
		{"TB", 1e12}, {"GB", 1e9}, {"MB", 1e6}, {"KB", 1e3}} {
		if n != 0 && n%u.mult == 0 {
			return strconv.FormatInt(n/u.mult, 10) + u.name
		}
	}
	return strconv.FormatInt(n, 10)
}
