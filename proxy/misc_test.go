package proxy

import (
	"os"
	"strconv"
	"time"

	"github.com/airlock-dev/airlock/broker"
)

func itoa(n int) string { return strconv.Itoa(n) }

func writeFileMode(path string, mode os.FileMode) error { return os.Chmod(path, mode) }

func brokerReq(inv string, port int, life time.Duration) broker.IssueRequest {
	return broker.IssueRequest{PluginID: "plugin-1", InvocationID: inv, Intent: "api.write",
		Destinations: []broker.Destination{{Host: "api.example.com", Port: port}}, Deadline: time.Now().Add(life)}
}

func grantFor(plugin string) *broker.Grant {
	return &broker.Grant{PluginID: plugin, Fingerprint: "fp-" + plugin}
}
