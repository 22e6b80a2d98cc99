package metadata_test

import (
	"context"
	"fmt"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/regen-s3/regen/metadata"
)

func ExampleStore_List() {
	ctx := context.Background()
	s, err := metadata.Open("db", metadata.Options{FS: vfs.NewMem()})
	if err != nil {
		panic(err)
	}
	defer s.Close()
	for i, key := range []string{"docs/a.txt", "docs/b.txt", "photos/x.jpg", "readme"} {
		m := &metadata.Manifest{Bucket: "b", Key: key, Version: metadata.Version{TS: int64(i + 1), Writer: "gw"},
			Size: 2, Inline: []byte("hi")}
		if _, err := s.PutManifest(ctx, m); err != nil {
			panic(err)
		}
	}
	// Deleting writes a tombstone; listings include it for the merging gateway.
	s.PutManifest(ctx, &metadata.Manifest{Bucket: "b", Key: "readme", Version: metadata.Version{TS: 9, Writer: "gw"}, Deleted: true})

	entries, truncated, _ := s.List(ctx, metadata.ListQuery{Bucket: "b", Delimiter: "/"})
	for _, e := range entries {
		fmt.Printf("key=%q prefix=%q deleted=%v\n", e.Key, e.Prefix, e.Deleted)
	}
	fmt.Println("truncated:", truncated)
	// Output:
	// key="" prefix="docs/" deleted=false
	// key="" prefix="photos/" deleted=false
	// key="readme" prefix="" deleted=true
	// truncated: false
}
