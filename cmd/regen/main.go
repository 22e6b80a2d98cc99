package main
import (
 _ "github.com/gofiber/fiber/v2"
 _ "github.com/klauspost/reedsolomon"
 _ "github.com/cockroachdb/pebble/v2"
 _ "github.com/hashicorp/memberlist"
 _ "github.com/minio/minio-go/v7"
 _ "github.com/prometheus/client_golang/prometheus"
 _ "github.com/schollz/progressbar/v3"
 _ "golang.org/x/sync/errgroup"
 _ "golang.org/x/time/rate"
)
func main(){}
