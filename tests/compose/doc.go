// Package compose tests the Docker Compose cluster of docker-compose.yml:
// real containers, one per server, joined by gossip. run.sh beside this
// file builds the image, starts the cluster, runs TestComposeCluster
// against it and removes everything afterwards. Without run.sh's
// environment the test skips, so `go test ./...` needs no Docker.
package compose
