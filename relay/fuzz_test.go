package relay_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/relay"
	"github.com/cvmgo/cvm/relay/relaytest"
)

// FuzzRelayFrames sends arbitrary client frames and checks that the relay
// keeps answering: no frame may crash it, wedge the connection or stop it from
// serving others.
func FuzzRelayFrames(f *testing.F) {
	for _, seed := range []string{
		`["EVENT",{}]`, `["REQ","x",{"kinds":[1],"#p":["zz"]}]`, `["CLOSE","x"]`, `["AUTH",{}]`,
		`["COUNT","c",{}]`, `[]`, `{}`, `["REQ"]`, `["REQ","",{"limit":-1}]`, `["EVENT",{"id":"00","sig":"zz"}]`,
		`["REQ","s",{"since":99999999999999999999}]`, `["NEG-OPEN","n",{},"00"]`, "\x00\xff", `"`,
	} {
		f.Add(seed)
	}
	s := relaytest.Start(f, relay.Options{Limits: unlimited})
	probe := newIdentity()
	f.Fuzz(func(t *testing.T, frame string) {
		ctx, cancel := testwait.Context(t, 10*time.Second)
		defer cancel()
		conn, err := dialErr(s.URL, nil)
		if err != nil {
			t.Fatalf("relay stopped accepting connections: %v", err)
		}
		defer conn.CloseNow()
		conn.Write(ctx, websocket.MessageText, []byte(frame))

		// A fresh connection must still get an answer to a valid EVENT.
		other, err := dialErr(s.URL, nil)
		if err != nil {
			t.Fatalf("relay stopped accepting connections: %v", err)
		}
		defer other.CloseNow()
		evt := probe.sign(t, 1, "probe")
		msg, _ := json.Marshal([]any{"EVENT", evt})
		if err := other.Write(ctx, websocket.MessageText, msg); err != nil {
			t.Fatal(err)
		}
		for {
			_, data, err := other.Read(ctx)
			if err != nil {
				t.Fatalf("no OK after frame %q: %v", frame, err)
			}
			var reply []json.RawMessage
			if json.Unmarshal(data, &reply) == nil && len(reply) > 1 && label(reply) == "OK" {
				return
			}
		}
	})
}
