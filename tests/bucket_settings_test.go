package tests

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// bucketSetting is one setting of the bucket record: put sets it to the
// value of round r, check says what is wrong with what a gateway reads.
type bucketSetting struct {
	name  string
	put   func(ctx context.Context, c *s3.Client, r int) error
	check func(ctx context.Context, c *s3.Client, r int) string
}

// All of a bucket's settings live in one record. Each round changes six
// of them at once, through two gateways (alternating), each request its
// own read-modify-write of the record; then every setting must read back
// as its own last request left it, through both gateways. A lost update
// shows as a setting still holding the value of the round before.
func TestConcurrentBucketSettingsSurvive(t *testing.T) {
	parallel(t)
	d := startDev(t)
	gw2 := startGateway(t, d, "--sse-keys", filepath.Join(d.dir, "sse-keys"))
	clients := []*s3.Client{sdkClient(d), sdkClientAt(gw2, keyPair{AccessKey: d.info.AccessKey, SecretKey: d.info.SecretKey})}
	const bucket = "settings"
	if _, err := clients[0].CreateBucket(ctx(t), &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "bucket visible through gateway 2", func() bool {
		_, err := clients[1].HeadBucket(ctx(t), &s3.HeadBucketInput{Bucket: aws.String(bucket)})
		return err == nil
	})
	b := aws.String(bucket)
	settings := []bucketSetting{
		{"tags", func(ctx context.Context, c *s3.Client, r int) error {
			_, err := c.PutBucketTagging(ctx, &s3.PutBucketTaggingInput{Bucket: b, Tagging: &types.Tagging{
				TagSet: []types.Tag{{Key: aws.String("round"), Value: aws.String(strconv.Itoa(r))}}}})
			return err
		}, func(ctx context.Context, c *s3.Client, r int) string {
			out, err := c.GetBucketTagging(ctx, &s3.GetBucketTaggingInput{Bucket: b})
			if err != nil {
				return err.Error()
			}
			if len(out.TagSet) != 1 || aws.ToString(out.TagSet[0].Value) != strconv.Itoa(r) {
				return fmt.Sprintf("tag set %v", out.TagSet)
			}
			return ""
		}},
		{"policy", func(ctx context.Context, c *s3.Client, r int) error {
			_, err := c.PutBucketPolicy(ctx, &s3.PutBucketPolicyInput{Bucket: b, Policy: aws.String(roundPolicy(bucket, r))})
			return err
		}, func(ctx context.Context, c *s3.Client, r int) string {
			out, err := c.GetBucketPolicy(ctx, &s3.GetBucketPolicyInput{Bucket: b})
			if err != nil {
				return err.Error()
			}
			if p := aws.ToString(out.Policy); p != roundPolicy(bucket, r) {
				return "policy " + p
			}
			return ""
		}},
		{"lifecycle", func(ctx context.Context, c *s3.Client, r int) error {
			_, err := c.PutBucketLifecycleConfiguration(ctx, &s3.PutBucketLifecycleConfigurationInput{Bucket: b,
				LifecycleConfiguration: &types.BucketLifecycleConfiguration{Rules: []types.LifecycleRule{{
					ID: aws.String(fmt.Sprintf("r%d", r)), Status: types.ExpirationStatusEnabled,
					Filter:     &types.LifecycleRuleFilter{Prefix: aws.String("tmp/")},
					Expiration: &types.LifecycleExpiration{Days: aws.Int32(int32(r + 1))},
				}}}})
			return err
		}, func(ctx context.Context, c *s3.Client, r int) string {
			out, err := c.GetBucketLifecycleConfiguration(ctx, &s3.GetBucketLifecycleConfigurationInput{Bucket: b})
			if err != nil {
				return err.Error()
			}
			if len(out.Rules) != 1 || aws.ToString(out.Rules[0].ID) != fmt.Sprintf("r%d", r) {
				return fmt.Sprintf("%d rules, first %q", len(out.Rules), aws.ToString(out.Rules[0].ID))
			}
			return ""
		}},
		{"cors", func(ctx context.Context, c *s3.Client, r int) error {
			_, err := c.PutBucketCors(ctx, &s3.PutBucketCorsInput{Bucket: b, CORSConfiguration: &types.CORSConfiguration{
				CORSRules: []types.CORSRule{{AllowedMethods: []string{"GET"}, AllowedOrigins: []string{fmt.Sprintf("https://r%d.example", r)}}}}})
			return err
		}, func(ctx context.Context, c *s3.Client, r int) string {
			out, err := c.GetBucketCors(ctx, &s3.GetBucketCorsInput{Bucket: b})
			if err != nil {
				return err.Error()
			}
			if len(out.CORSRules) != 1 || strings.Join(out.CORSRules[0].AllowedOrigins, ",") != fmt.Sprintf("https://r%d.example", r) {
				return fmt.Sprintf("CORS rules %+v", out.CORSRules)
			}
			return ""
		}},
		// Encryption and ownership take two values: even rounds set one,
		// odd rounds the other (encryption: deleted).
		{"encryption", func(ctx context.Context, c *s3.Client, r int) error {
			if r%2 == 1 {
				_, err := c.DeleteBucketEncryption(ctx, &s3.DeleteBucketEncryptionInput{Bucket: b})
				return err
			}
			_, err := c.PutBucketEncryption(ctx, &s3.PutBucketEncryptionInput{Bucket: b, ServerSideEncryptionConfiguration: &types.ServerSideEncryptionConfiguration{
				Rules: []types.ServerSideEncryptionRule{{ApplyServerSideEncryptionByDefault: &types.ServerSideEncryptionByDefault{SSEAlgorithm: types.ServerSideEncryptionAes256}}}}})
			return err
		}, func(ctx context.Context, c *s3.Client, r int) string {
			_, err := c.GetBucketEncryption(ctx, &s3.GetBucketEncryptionInput{Bucket: b})
			switch {
			case r%2 == 0 && err != nil:
				return "no encryption: " + err.Error()
			case r%2 == 1 && apiCode(err) != "ServerSideEncryptionConfigurationNotFoundError":
				return fmt.Sprintf("encryption still set (%v)", err)
			}
			return ""
		}},
		{"ownership", func(ctx context.Context, c *s3.Client, r int) error {
			_, err := c.PutBucketOwnershipControls(ctx, &s3.PutBucketOwnershipControlsInput{Bucket: b, OwnershipControls: &types.OwnershipControls{
				Rules: []types.OwnershipControlsRule{{ObjectOwnership: roundOwnership(r)}}}})
			return err
		}, func(ctx context.Context, c *s3.Client, r int) string {
			out, err := c.GetBucketOwnershipControls(ctx, &s3.GetBucketOwnershipControlsInput{Bucket: b})
			if err != nil {
				return err.Error()
			}
			if got := out.OwnershipControls.Rules[0].ObjectOwnership; got != roundOwnership(r) {
				return "ownership " + string(got)
			}
			return ""
		}},
	}
	const rounds = 8
	for r := range rounds {
		var wg sync.WaitGroup
		for i, s := range settings {
			c := clients[(i+r)%2]
			wg.Go(func() {
				if err := s.put(ctx(t), c, r); err != nil {
					t.Errorf("round %d: set %s: %v", r, s.name, err)
				}
			})
		}
		wg.Wait()
		if t.Failed() {
			return
		}
		// A gateway caches bucket records for up to 2 s, so the other
		// gateway may read the round before for that long; a lost
		// update stays lost.
		deadline := time.Now().Add(8 * time.Second)
		for {
			var lost []string
			for gw, c := range clients {
				for _, s := range settings {
					if msg := s.check(ctx(t), c, r); msg != "" {
						lost = append(lost, fmt.Sprintf("gateway %d: %s: %s", gw+1, s.name, msg))
					}
				}
			}
			if len(lost) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("round %d: settings lost or stale after 8 s:\n%s", r, strings.Join(lost, "\n"))
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}

func roundPolicy(bucket string, r int) string {
	return fmt.Sprintf(`{"Version":"2012-10-17","Statement":[{"Sid":"r%d","Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::%s/r%d/*"}]}`, r, bucket, r)
}

func roundOwnership(r int) types.ObjectOwnership {
	if r%2 == 0 {
		return types.ObjectOwnershipObjectWriter
	}
	return types.ObjectOwnershipBucketOwnerPreferred
}
