package cluster

import (
	"testing"
	"time"
)

// TestLocalProfileTimings pins what the local profile trades: gossip
// ticks, which wake every idle process whether or not anything is queued,
// at the LAN profile's rate, while the failure detector keeps the timings
// that declare a killed server dead in seconds.
func TestLocalProfileTimings(t *testing.T) {
	local, lan := profileConfig("local"), profileConfig("lan")
	if local.GossipInterval < lan.GossipInterval {
		t.Errorf("local gossip every %s, more often than LAN's %s: each tick wakes an idle process", local.GossipInterval, lan.GossipInterval)
	}
	if local.ProbeInterval != time.Second || local.ProbeTimeout != 500*time.Millisecond || local.SuspicionMult != 4 {
		t.Errorf("local failure detection changed: probe every %s, timeout %s, suspicion x%d", local.ProbeInterval, local.ProbeTimeout, local.SuspicionMult)
	}
	if local.EnableCompression {
		t.Error("local profile compresses: a 64 KiB LZW table per packet, pings included, for loopback bytes")
	}
	if local.PushPullInterval != 10*time.Second || local.RetransmitMult != 4 {
		t.Errorf("local push-pull every %s, retransmit x%d", local.PushPullInterval, local.RetransmitMult)
	}
}
