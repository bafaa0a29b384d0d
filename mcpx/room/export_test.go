package room

import (
	"crypto/ed25519"
	"encoding/json"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/coder/websocket"
	"github.com/cvmgo/cvm/mcpx"
)

// The kill -9 tests (kill_test.go) are in package room_test: they publish
// with roomtest.Publisher, and roomtest imports room. These give them the
// gateway processes of crash_test.go.

// ChildGateway is a "cvm room serve" process a test started.
type ChildGateway = childGateway

// StartChildGateway is startChildGateway.
func StartChildGateway(t *testing.T, dir string, extra ...string) *ChildGateway {
	t.Helper()
	return startChildGateway(t, dir, extra...)
}

// Kill sends SIGKILL and waits for the process to be gone.
func (c *childGateway) Kill() { c.kill() }

// Stderr is what the process logged.
func (c *childGateway) Stderr() string { return c.stderr.String() }

// Dial connects participant id to topic and reads its welcome.
func (c *childGateway) Dial(t *testing.T, keys *Keys, topic, id string) *websocket.Conn {
	t.Helper()
	return dialChild(t, c, keys, topic, id)
}

// History reads topic's whole history as reader: seq -> envelope id.
func (c *childGateway) History(t *testing.T, keys *Keys, topic, reader string) map[uint64]string {
	t.Helper()
	return childHistory(t, c, keys, topic, reader)
}

// What the tests of package room_test (which share gatewaytest with the
// backends' tests) need of the package's insides.

// ErrorBody is the JSON body of a refused HTTP request.
type ErrorBody = errorBody

// HardFrameLimitFactor is hardFrameLimitFactor.
const HardFrameLimitFactor = hardFrameLimitFactor

// BearerPrefix is bearerPrefix.
const BearerPrefix = bearerPrefix

// ForgeExpired signs a token that expired an hour ago.
func ForgeExpired(k *Keys, id, topic string) string {
	hb, _ := json.Marshal(jwsHeader{Alg: AlgEdDSA, KID: k.edKID})
	cb, _ := json.Marshal(Claims{Subject: id, Audience: Audience{topic}, ExpiresAt: time.Now().Add(-time.Hour).Unix()})
	return forge(string(hb), string(cb), func(b []byte) []byte { return ed25519.Sign(k.ed, b) })
}

// TopicSize is how many participants topic has on g (0: never created).
func TopicSize(g *Gateway, topic string) int {
	t := g.existingTopic(topic)
	if t == nil {
		return 0
	}
	return t.size()
}

// SlowConsumerDrops is how many connections g dropped as slow consumers.
func SlowConsumerDrops(g *Gateway) float64 {
	var m dto.Metric
	g.metrics.dropped.WithLabelValues(string(mcpx.LeaveSlowConsumer)).Write(&m)
	return m.GetCounter().GetValue()
}

// Echoes counts topic's echoes the log stored that wait for the follower,
// and the answers waiting behind the echoes.
func Echoes(g *Gateway, topic string) (acked, waiting int) {
	t := g.existingTopic(topic)
	t.echoMu.Lock()
	defer t.echoMu.Unlock()
	for _, w := range t.echoes {
		if w.acked {
			acked++
		}
		waiting += len(w.after)
	}
	return acked, waiting
}
