package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/regen-s3/regen/gateway"
	"github.com/regen-s3/regen/internal/sigv4"
)

// adminCommand is one `regen admin` subcommand.
type adminCommand struct {
	name, args, summary string
	run                 func(context.Context, *adminClient, []string, io.Writer) error
}

// adminCommands lists every admin subcommand, in the order help shows them;
// `regen --help` and `regen admin` print this list.
func adminCommands() []adminCommand {
	return []adminCommand{
		{"status", "", "cluster summary and every node", adminStatus},
		{"nodes", "", "every node: role, state, address, shards, disk", adminNodes},
		{"repair watch", "", "repair progress until nothing is degraded", adminRepairWatch},
		{"drain", "NODE", "move a shard server's shards to the others before removing it; shows progress\n" +
			"until it holds none (--watch: only show progress, --no-wait: only start, --cancel: stop draining)", adminDrain},
		{"bucket set-code", "BUCKET CODE", "code for the bucket's new objects (e.g. clay-6-3; \"\" for the default)", adminBucketSetCode},
		{"key create", "--name NAME", "a new access key pair; prints its secret key, once (--admin, --create-buckets)", adminKeyCreate},
		{"key list", "", "every access key and its rights (never a secret)", adminKeyList},
		{"key grant", "KEY --bucket B --right R", "give KEY (access key or name) read, write or owner on bucket B;\n" +
			"--prefix P (or --bucket B/P): only on B's keys that begin with P;\n" +
			"without --bucket: --right admin or create-buckets", adminKeyGrant},
		{"key revoke", "KEY [--bucket B] [--prefix P] [--right R]", "take rights back (every right on B, its prefixes' too, without --prefix\n" +
			"and --right); works within seconds", adminKeyRevoke},
		{"key delete", "KEY", "delete a stored key: every gateway refuses it within seconds", adminKeyDelete},
	}
}

// adminList writes the subcommands, one per line, indented by indent.
func adminList(w io.Writer, indent string) {
	for _, c := range adminCommands() {
		head := strings.TrimSpace(c.name + " " + c.args)
		for i, line := range strings.Split(c.summary, "\n") {
			if i > 0 {
				head = ""
			}
			fmt.Fprintf(w, "%s%-28s %s\n", indent, head, line)
		}
	}
}

func runAdmin(ctx context.Context, args []string, stdout io.Writer) error {
	for _, c := range adminCommands() {
		words := strings.Fields(c.name)
		if len(args) >= len(words) && strings.Join(args[:len(words)], " ") == c.name {
			return adminRun(ctx, c, args[len(words):], stdout)
		}
	}
	var b strings.Builder
	b.WriteString("usage: regen admin COMMAND [--endpoint URL] [--access-key K --secret-key S] [--json]\n\ncommands:\n")
	adminList(&b, "  ")
	b.WriteString("\nrun 'regen admin COMMAND -h' for its flags")
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintln(stdout, b.String())
		if len(args) == 0 {
			return usageErrorf("missing command")
		}
		return nil
	}
	return usageErrorf("unknown admin command %q\n\n%s", args[0], b.String())
}

func adminRun(ctx context.Context, cmd adminCommand, args []string, stdout io.Writer) error {
	o := newOptionSet("admin "+cmd.name, strings.ReplaceAll(cmd.summary, "\n", " "))
	o.args = cmd.args
	// The timeout bounds every call: a wrong endpoint that swallows
	// packets must not hang the command.
	c := &adminClient{hc: &http.Client{Timeout: 30 * time.Second}}
	o.String(&c.endpoint, "endpoint", "REGEN_ENDPOINT", "http://127.0.0.1:9000", "gateway URL")
	o.String(&c.accessKey, "access-key", "REGEN_ACCESS_KEY", defaultAccessKey, "access key").alsoEnv("AWS_ACCESS_KEY_ID")
	o.String(&c.secretKey, "secret-key", "REGEN_SECRET_KEY", defaultSecretKey, "secret key").alsoEnv("AWS_SECRET_ACCESS_KEY")
	o.String(&c.region, "region", "REGEN_REGION", "us-east-1", "region")
	o.Bool(&c.json, "json", "", false, "print JSON")
	if cmd.name == "repair watch" || cmd.name == "drain" {
		o.Duration(&c.timeout, "timeout", "", 0, "give up watching after this long, 0 = never")
	}
	if cmd.name == "drain" {
		o.Bool(&c.drain.cancel, "cancel", "", false, "stop draining: the node takes new shards again (what moved stays moved)")
		o.Bool(&c.drain.watch, "watch", "", false, "only show the drain's progress, do not start it")
		o.Bool(&c.drain.noWait, "no-wait", "", false, "start the drain and return without showing progress")
	}
	registerKeyOptions(o, cmd.name, &c.key)
	pos, err := o.ParseArgs(args, c.Validate)
	if err != nil {
		return err
	}
	return cmd.run(ctx, c, pos, stdout)
}

// Validate checks the admin options.
func (c *adminClient) Validate() error {
	if c.accessKey == "" || c.secretKey == "" {
		return usageErrorf("no credentials: set --access-key and --secret-key (or REGEN_ACCESS_KEY and REGEN_SECRET_KEY, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)")
	}
	u, err := url.Parse(c.endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return badOption("endpoint", "want a URL like http://127.0.0.1:9000")
	}
	if c.timeout < 0 {
		return badOption("timeout", "must not be negative")
	}
	return nil
}

type adminClient struct {
	endpoint, accessKey, secretKey, region string
	json                                   bool
	timeout                                time.Duration // repair watch, drain
	drain                                  struct{ cancel, watch, noWait bool }
	key                                    keyOptions // key create, grant, revoke
	hc                                     *http.Client
}

// get fetches an admin resource, signed with SigV4 like any S3 request.
func (c *adminClient) get(ctx context.Context, path string, out any) error {
	return c.do(ctx, http.MethodGet, path, nil, out)
}

func (c *adminClient) do(ctx context.Context, method, path string, query url.Values, out any) error {
	u := strings.TrimRight(c.endpoint, "/") + gateway.AdminPrefix + path
	if len(query) > 0 {
		// SigV4 wants %20, not +, in the canonical query.
		u += "?" + strings.ReplaceAll(query.Encode(), "+", "%20")
	}
	req, err := http.NewRequestWithContext(ctx, method, u, nil)
	if err != nil {
		return err
	}
	sigv4.Sign(req, c.accessKey, c.secretKey, c.region, time.Now(), "UNSIGNED-PAYLOAD")
	resp, err := c.hc.Do(req)
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) || strings.Contains(err.Error(), "connection refused") {
			return fmt.Errorf("cannot reach the gateway at %s (is regen running? set --endpoint or REGEN_ENDPOINT): %w", c.endpoint, err)
		}
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Code    string `xml:"Code"`
			Message string `xml:"Message"`
		}
		if xmlErr := xmlUnmarshal(body, &e); xmlErr == nil && e.Code != "" {
			if e.Code == "InvalidAccessKeyId" || e.Code == "SignatureDoesNotMatch" {
				return fmt.Errorf("the gateway refused the credentials (%s: %s); set --access-key/--secret-key or REGEN_ACCESS_KEY/REGEN_SECRET_KEY", e.Code, e.Message)
			}
			return fmt.Errorf("%s: %s", e.Code, e.Message)
		}
		return fmt.Errorf("%s answered %s, not like a regen gateway (is --endpoint the S3 address of a gateway?)", c.endpoint, resp.Status)
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("%s answered something other than regen's admin JSON (is --endpoint the S3 address of a gateway?): %w", c.endpoint, err)
	}
	return nil
}

// adminBucketSetCode sets the code of a bucket's new objects.
func adminBucketSetCode(ctx context.Context, c *adminClient, args []string, w io.Writer) error {
	if len(args) != 2 {
		return usageErrorf("usage: regen admin bucket set-code BUCKET CODE   (CODE like rs-6-3 or clay-6-3; \"\" for the cluster default)")
	}
	var res struct {
		Bucket   string `json:"bucket"`
		Code     string `json:"code"`
		Previous string `json:"previous"`
	}
	if err := c.do(ctx, http.MethodPost, "bucket-code", url.Values{"bucket": {args[0]}, "code": {args[1]}}, &res); err != nil {
		return err
	}
	if c.json {
		return json.NewEncoder(w).Encode(res)
	}
	show := func(code string) string {
		if code == "" {
			return "the cluster default"
		}
		return code
	}
	fmt.Fprintf(w, "bucket %s: new objects use %s (was %s); existing objects keep their code\n", res.Bucket, show(res.Code), show(res.Previous))
	return nil
}

func adminStatus(ctx context.Context, c *adminClient, _ []string, w io.Writer) error {
	var st gateway.Status
	if err := c.get(ctx, "status", &st); err != nil {
		return err
	}
	if c.json {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(st)
	}
	counts := map[string]int{}
	for _, n := range st.Nodes {
		counts[string(n.Role)+"/"+string(n.State)]++
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	fmt.Fprintf(w, "cluster (as seen by gateway %s at %s)\n", st.Gateway, st.Time.Format(time.RFC3339))
	for _, k := range keys {
		fmt.Fprintf(w, "  %-20s %d\n", k, counts[k])
	}
	fmt.Fprintf(w, "  manifests on live servers: %d   shard files: %d\n", st.Manifests, st.Shards)
	if st.Previous > 0 {
		fmt.Fprintf(w, "  previous versions (noncurrent, delete markers, awaiting confirmation): %d   their shard files: %d\n", st.Previous, st.PreviousShards)
	}
	if st.Tombstones > 0 || st.TombstoneJobs > 0 || st.TombstonesCollected > 0 || st.TombstoneChecksBlocked > 0 {
		fmt.Fprintf(w, "  delete tombstones: %d   queued for collection: %d   collected since start: %d   checks blocked by a silent server: %d\n",
			st.Tombstones, st.TombstoneJobs, st.TombstonesCollected, st.TombstoneChecksBlocked)
	}
	if s := st.Stripes; s != nil {
		fmt.Fprintf(w, "  stripe groups: %d, degraded %d", s.Total, s.Degraded)
		if s.Noncurrent > 0 {
			fmt.Fprintf(w, " (of all, %d of noncurrent versions)", s.Noncurrent)
		}
		if s.Draining > 0 {
			fmt.Fprintf(w, ", to move off draining servers %d (%d waiting for capacity)", s.Draining, s.DrainWaiting)
		}
		fmt.Fprintln(w)
	}
	printLifecycle(w, st.Lifecycle)
	fmt.Fprintln(w)
	return printNodes(w, st)
}

// printLifecycle prints the line of the gateway's lifecycle service.
func printLifecycle(w io.Writer, l gateway.LifecycleStatus) {
	last := "no pass yet"
	if !l.LastRun.IsZero() {
		last = "last pass " + l.LastRun.UTC().Format(time.RFC3339)
	}
	fmt.Fprintf(w, "  lifecycle (this gateway): %s, %d passes, objects expired %d, noncurrent versions expired %d, delete markers removed %d, uploads aborted %d, errors %d",
		last, l.Passes, l.Expired, l.Noncurrent, l.Markers, l.Aborted, l.Errors)
	if l.Waiting > 0 {
		fmt.Fprintf(w, ", %d passes skipped waiting for shard servers", l.Waiting)
	}
	fmt.Fprintln(w)
}

func adminNodes(ctx context.Context, c *adminClient, _ []string, w io.Writer) error {
	var st gateway.Status
	if err := c.get(ctx, "status", &st); err != nil {
		return err
	}
	if c.json {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(st.Nodes)
	}
	return printNodes(w, st)
}

func printNodes(w io.Writer, st gateway.Status) error {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tROLE\tSTATE\tADDRESS\tMANIFESTS\tSHARDS\tDISK USED")
	for _, n := range st.Nodes {
		manifests, shards, used := "-", "-", "-"
		if n.Stats != nil {
			manifests = fmt.Sprint(n.Stats.Objects)
			shards = fmt.Sprint(n.Stats.Shards)
			if n.Stats.Inline > 0 {
				shards += fmt.Sprintf("+%d inline", n.Stats.Inline)
			}
			used = humanBytes(n.Stats.DiskUsedBytes)
		}
		state := string(n.State)
		if n.Draining {
			state += ",draining"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", n.ID, n.Role, state, n.HTTP, manifests, shards, used)
	}
	return tw.Flush()
}

func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

func runHealth(ctx context.Context, args []string, stdout io.Writer) error {
	o := newOptionSet("health", "Probe a server's health endpoint; exit status 0 when it answers 200 (for container healthchecks).")
	var addr, path string
	o.String(&addr, "addr", "REGEN_HEALTH_ADDR", "127.0.0.1:9000", "host:port of the server to probe")
	o.String(&path, "path", "", "/healthz", "path to probe (/healthz or /readyz)")
	var https bool
	o.Bool(&https, "https", "REGEN_HEALTH_HTTPS", false, "probe over HTTPS, for a server with --tls-cert or --shard-tls-cert; its certificate is not checked, since the probe sends nothing and reads only a status")
	err := o.Parse(args, func() error {
		if err := checkHostPort("addr", addr); err != nil {
			return err
		}
		if !strings.HasPrefix(path, "/") {
			return badOption("path", "want a path starting with /")
		}
		return nil
	})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	scheme, client := "http://", http.DefaultClient
	if https {
		scheme = "https://"
		client = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, scheme+addr+path, nil)
	if err != nil {
		return usageErrorf("--addr %q: %v", addr, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		fmt.Fprintln(os.Stderr, "unhealthy:", resp.Status)
		return fmt.Errorf("unhealthy: %s", resp.Status)
	}
	fmt.Fprintln(stdout, "ok")
	return nil
}
