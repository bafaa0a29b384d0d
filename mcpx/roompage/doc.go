// Package roompage is the browser page of an MCPx gateway (cvm room serve):
// join a topic with a token, see who is there, chat (plain and markdown),
// read history back by seq, list a participant's tools and call one through
// a form built from its schema (opened right under the tool chosen), and
// watch the envelopes arrive.
//
// The page is static, embedded in the binary; everything it does goes
// through the gateway's own endpoints, authenticated as docs/mcpx.md allows
// a browser: the token as the bearer.<token> WebSocket subprotocol and as an
// Authorization header on REST calls. The token lives in the page's memory
// only.
package roompage

import (
	"embed"
	"io/fs"
	"net/http"

	"github.com/cvmgo/cvm/internal/webui"
)

//go:embed assets
var assets embed.FS

// Handler serves the page at "/" and its files under /ui/. Requests whose
// Host is not a loopback name or matches none of allowedHosts (patterns as
// in path.Match) are refused, against DNS rebinding.
func Handler(allowedHosts []string) http.Handler {
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the embedded directory exists: a build error otherwise
	}
	return webui.CheckHost(webui.NewPages(sub), allowedHosts)
}
