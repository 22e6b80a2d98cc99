// Package placement decides where the shards of a stripe group live. It is
// pure: the same key and the same node set always give the same answer.
//
// It uses rendezvous (highest-random-weight) hashing: every node gets a
// score for the key and nodes are taken in descending score order. Removing
// or adding a node never reorders the others, so a reader that walks the
// order over the nodes it knows now still meets the servers a writer chose
// earlier, and only the shards of a changed node move.
package placement
