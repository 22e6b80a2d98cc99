package cluster

import "github.com/prometheus/client_golang/prometheus"

// membersDesc is regen_cluster_members: how many members of each role are
// in each state, as this node sees them. Every role and state is reported,
// zeros included, so an alert on state="dead" > 0 always has a series.
var membersDesc = prometheus.NewDesc("regen_cluster_members",
	"Cluster members by role and state, as seen by this node.", []string{"role", "state"}, nil)

// Collector exports the node's view of the membership to Prometheus; it
// reads Members at scrape time, so it never lags.
func (n *Node) Collector() prometheus.Collector { return membersCollector{n} }

type membersCollector struct{ n *Node }

func (c membersCollector) Describe(ch chan<- *prometheus.Desc) { ch <- membersDesc }

func (c membersCollector) Collect(ch chan<- prometheus.Metric) {
	counts := map[Role]map[State]int{RoleShard: {}, RoleGateway: {}}
	for _, m := range c.n.Members() {
		if counts[m.Role] == nil {
			counts[m.Role] = map[State]int{}
		}
		counts[m.Role][m.State]++
	}
	for role, byState := range counts {
		for _, st := range []State{StateAlive, StateSuspect, StateDead, StateLeft} {
			ch <- prometheus.MustNewConstMetric(membersDesc, prometheus.GaugeValue, float64(byState[st]), string(role), string(st))
		}
	}
}
