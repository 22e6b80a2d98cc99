// Package pause waits for a duration unless a context ends first: the
// back-offs and retry delays of the gateway, the shard RPC client and the
// chaos nemesis, which must all give up at once when their request or run
// is cancelled rather than sleep out their delay.
package pause
