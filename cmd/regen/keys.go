package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/regen-s3/regen/gateway"
)

// keyOptions are the options of the `regen admin key` commands.
type keyOptions struct {
	name, bucket, prefix string
	right                string
	admin, createBuckets bool
}

// registerKeyOptions declares the options key command cmd takes.
func registerKeyOptions(o *optionSet, cmd string, k *keyOptions) {
	switch cmd {
	case "key create":
		o.String(&k.name, "name", "", "", "the key's name, for people: who or what uses it (required)")
		o.Bool(&k.admin, "admin", "", false, "an administrator: every right on every bucket and the operator API")
		o.Bool(&k.createBuckets, "create-buckets", "", false, "may create buckets (and owns those it creates)")
	case "key grant", "key revoke":
		o.String(&k.bucket, "bucket", "", "", "the bucket (or BUCKET/PREFIX); without it, --right is admin or create-buckets")
		o.String(&k.prefix, "prefix", "", "", "only the bucket's objects whose keys begin with this (and listings of them)")
		o.String(&k.right, "right", "", "", "read, write, owner (comma-separated), or admin / create-buckets without --bucket")
	}
}

func adminKeyCreate(ctx context.Context, c *adminClient, args []string, w io.Writer) error {
	if len(args) != 0 || c.key.name == "" {
		return usageErrorf("usage: regen admin key create --name NAME [--admin] [--create-buckets]")
	}
	q := url.Values{"name": {c.key.name}}
	if c.key.admin {
		q.Set("admin", "true")
	}
	if c.key.createBuckets {
		q.Set("create-buckets", "true")
	}
	var k gateway.KeyInfo
	if err := c.do(ctx, http.MethodPost, "keys", q, &k); err != nil {
		return err
	}
	if c.json {
		return json.NewEncoder(w).Encode(k)
	}
	fmt.Fprintf(w, "created access key %s (%s)%s\n", k.AccessKey, k.Name, flagsNote(k))
	fmt.Fprintf(w, "  access key: %s\n  secret key: %s\n", k.AccessKey, k.SecretKey)
	fmt.Fprintln(w, "The secret key is shown only now: store it where its user will find it.")
	if !k.Admin {
		fmt.Fprintf(w, "It has no rights on any bucket yet: regen admin key grant %s --bucket BUCKET --right read\n", k.Name)
	}
	return nil
}

// flagsNote describes a key's admin and create-buckets flags, if set.
func flagsNote(k gateway.KeyInfo) string {
	var f []string
	if k.Admin {
		f = append(f, "administrator")
	}
	if k.CreateBuckets && !k.Admin {
		f = append(f, "may create buckets")
	}
	if len(f) == 0 {
		return ""
	}
	return ", " + strings.Join(f, ", ")
}

func adminKeyList(ctx context.Context, c *adminClient, args []string, w io.Writer) error {
	if len(args) != 0 {
		return usageErrorf("usage: regen admin key list")
	}
	var keys []gateway.KeyInfo
	if err := c.get(ctx, "keys", &keys); err != nil {
		return err
	}
	if c.json {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(keys)
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ACCESS KEY\tNAME\tADMIN\tCREATE BUCKETS\tRIGHTS")
	for _, k := range keys {
		name := k.Name
		if k.Configured {
			name = "(configured)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", k.AccessKey, name, yesNo(k.Admin), yesNo(k.CreateBuckets || k.Admin), rightsText(k))
	}
	return tw.Flush()
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// rightsText lists a key's rights on buckets, then on prefixes of
// buckets: "photos:read,write logs:write photos/2024/:owner".
func rightsText(k gateway.KeyInfo) string {
	if k.Admin {
		return "every bucket"
	}
	if len(k.Buckets) == 0 && len(k.Prefixes) == 0 {
		return "-"
	}
	var parts []string
	for _, b := range slices.Sorted(maps.Keys(k.Buckets)) {
		parts = append(parts, b+":"+strings.Join(k.Buckets[b], ","))
	}
	for _, p := range slices.Sorted(maps.Keys(k.Prefixes)) {
		parts = append(parts, p+":"+strings.Join(k.Prefixes[p], ","))
	}
	return strings.Join(parts, " ")
}

func adminKeyDelete(ctx context.Context, c *adminClient, args []string, w io.Writer) error {
	if len(args) != 1 {
		return usageErrorf("usage: regen admin key delete KEY   (KEY: the access key or the key's name)")
	}
	var k gateway.KeyInfo
	if err := c.do(ctx, http.MethodDelete, "keys", url.Values{"key": {args[0]}}, &k); err != nil {
		return err
	}
	if c.json {
		return json.NewEncoder(w).Encode(k)
	}
	fmt.Fprintf(w, "deleted access key %s (%s): every gateway refuses it within seconds\n", k.AccessKey, k.Name)
	return nil
}

func adminKeyGrant(ctx context.Context, c *adminClient, args []string, w io.Writer) error {
	return adminKeyRights(ctx, c, args, w, true)
}

func adminKeyRevoke(ctx context.Context, c *adminClient, args []string, w io.Writer) error {
	return adminKeyRights(ctx, c, args, w, false)
}

func adminKeyRights(ctx context.Context, c *adminClient, args []string, w io.Writer, grant bool) error {
	verb, method := "grant", http.MethodPost
	if !grant {
		verb, method = "revoke", http.MethodDelete
	}
	if len(args) != 1 || (c.key.right == "" && (grant || c.key.bucket == "")) {
		return usageErrorf("usage: regen admin key %s KEY --bucket BUCKET[/PREFIX] [--prefix PREFIX] --right read|write|owner   or   regen admin key %s KEY --right admin|create-buckets", verb, verb)
	}
	if c.key.prefix != "" && c.key.bucket == "" {
		return usageErrorf("--prefix needs --bucket")
	}
	q := url.Values{"key": {args[0]}, "right": {c.key.right}}
	if c.key.bucket != "" {
		q.Set("bucket", c.key.bucket)
	}
	if c.key.prefix != "" {
		q.Set("prefix", c.key.prefix)
	}
	var k gateway.KeyInfo
	if err := c.do(ctx, method, "keys/grant", q, &k); err != nil {
		return err
	}
	if c.json {
		return json.NewEncoder(w).Encode(k)
	}
	fmt.Fprintf(w, "access key %s (%s)%s: %s\n", k.AccessKey, k.Name, flagsNote(k), rightsText(k))
	return nil
}
