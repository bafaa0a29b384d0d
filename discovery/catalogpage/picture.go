package catalogpage

import (
	"context"
	"net/http"
	"strconv"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/internal/webui"
	"github.com/cvmgo/cvm/outbound"
)

// maxPictures bounds the pictures kept (forgotten all at once when full:
// each is at most MaxPictureBytes, and fetched again when asked for).
const maxPictures = 1000

type picture struct {
	url   string
	ctype string
	data  []byte // nil: not an image, too big, or not fetched
}

// pictureAllowed reports whether the page would try to fetch u: an http
// or https URL without credentials, not at a literal private address.
func (p *Page) pictureAllowed(u string) bool {
	return u != "" && p.opts.Fetcher.CheckURL(u) == nil
}

// servePicture serves a server's picture, fetched once by cvm through the
// outbound Fetcher: only from public addresses, only raster image types
// (never SVG, which can carry script), at most MaxPictureBytes; anything
// else is a 404 and the page shows none.
func (p *Page) servePicture(w http.ResponseWriter, r *http.Request) {
	pk, err := nostr.PubKeyFromHex(r.PathValue("pubkey"))
	if err != nil {
		webui.WriteError(w, http.StatusBadRequest, CodeBadRequest, "want a server's public key in hex")
		return
	}
	s, ok := p.opts.Catalog.Server(pk)
	if !ok || !p.pictureAllowed(s.Picture) {
		webui.WriteError(w, http.StatusNotFound, CodeNoPicture, "this server announces no picture cvm can fetch")
		return
	}
	src := s.Picture
	p.mu.Lock()
	pic, cached := p.pictures[pk.Hex()]
	p.mu.Unlock()
	if !cached || pic.url != src {
		pic = p.fetchPicture(r.Context(), src)
		p.mu.Lock()
		if len(p.pictures) >= maxPictures {
			clear(p.pictures)
		}
		p.pictures[pk.Hex()] = pic
		p.mu.Unlock()
	}
	if pic.data == nil {
		webui.WriteError(w, http.StatusNotFound, CodeNoPicture, "the server's picture is not a PNG, JPEG, GIF or WebP image of at most "+
			strconv.FormatInt(p.opts.MaxPictureBytes, 10)+" bytes on a public address, or could not be fetched")
		return
	}
	w.Header().Set("Content-Type", pic.ctype)
	w.Header().Set("Cache-Control", "private, max-age=300")
	w.Write(pic.data)
}

func (p *Page) fetchPicture(ctx context.Context, src string) picture {
	pic := picture{url: src}
	res, err := p.opts.Fetcher.GetImage(ctx, outbound.Request{URL: src, MaxBytes: p.opts.MaxPictureBytes, FollowRedirects: true})
	if err != nil {
		p.log.Info("picture not used", "url", src, "err", err)
		return pic
	}
	pic.ctype, pic.data = res.ContentType, res.Body
	return pic
}
