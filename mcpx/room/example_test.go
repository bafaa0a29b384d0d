package room_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/coder/websocket"
	"github.com/cvmgo/cvm/mcpx"
	"github.com/cvmgo/cvm/mcpx/history"
	"github.com/cvmgo/cvm/mcpx/room"
)

// A gateway with durable history, a token minted with its key, and a
// participant that joins and reads its welcome.
func Example() {
	dir, _ := os.MkdirTemp("", "room-")
	defer os.RemoveAll(dir)

	keys, err := room.LoadOrCreateKeys(dir)
	if err != nil {
		panic(err)
	}
	store, err := history.Open(filepath.Join(dir, "history.db"), history.Options{})
	if err != nil {
		panic(err)
	}
	defer store.Close()
	gw, err := room.Start("127.0.0.1:0", room.Options{Tokens: keys, History: store})
	if err != nil {
		panic(err)
	}
	defer gw.Close()

	token, _ := keys.Sign(room.Claims{
		Subject:   "robot-alpha",
		Audience:  room.Audience{"room:alpha"},
		ExpiresAt: time.Now().Add(time.Hour).Unix(),
		Name:      "Robot Alpha",
		Kind:      mcpx.ParticipantRobot,
	}, room.AlgEdDSA)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, _, err := websocket.Dial(ctx, gw.WSURL+"?topic=room:alpha", &websocket.DialOptions{
		HTTPHeader:   http.Header{"Authorization": {"Bearer " + token}},
		Subprotocols: []string{mcpx.Subprotocol},
	})
	if err != nil {
		panic(err)
	}
	defer conn.CloseNow()
	_, welcome, err := conn.Read(ctx)
	if err != nil {
		panic(err)
	}
	var w struct {
		Kind    string `json:"kind"`
		Payload struct {
			Event       string           `json:"event"`
			Participant mcpx.Participant `json:"participant"`
		} `json:"payload"`
	}
	json.Unmarshal(welcome, &w)
	fmt.Println(w.Kind, w.Payload.Event, w.Payload.Participant.Name, conn.Subprotocol())
	// Output: system welcome Robot Alpha mcp-x.v0
}
