package outbound

import (
	"context"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"slices"
	"strings"
)

// jsonTypes are what GetJSON accepts unless told otherwise: JSON, and the
// types built on it (application/did+json, application/ld+json, …).
var jsonTypes = []string{"application/json", "application/*+json"}

// GetJSON fetches req.URL and decodes its body, served as JSON (see
// jsonTypes; req.Accept replaces them), into v. A body that does not
// decode is ErrBadBody.
func (f *Fetcher) GetJSON(ctx context.Context, req Request, v any) error {
	if len(req.Accept) == 0 {
		req.Accept = jsonTypes
	}
	res, err := f.Get(ctx, req)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(res.Body, v); err != nil {
		return fmt.Errorf("GET %.300s: %w: %v", res.URL, ErrBadBody, err)
	}
	return nil
}

// imageTypes are the images GetImage returns: raster formats only, never
// SVG, which can carry script.
var imageTypes = []string{"image/png", "image/jpeg", "image/gif", "image/webp"}

// GetImage fetches a PNG, JPEG, GIF or WebP image. The server must declare
// an image type (req.Accept, default image/*), and the bytes decide which
// one it is: Response.ContentType is what they show, whatever the server
// said, and bytes of any other kind are ErrContentType.
func (f *Fetcher) GetImage(ctx context.Context, req Request) (*Response, error) {
	if len(req.Accept) == 0 {
		req.Accept = []string{"image/*"}
	}
	res, err := f.Get(ctx, req)
	if err != nil {
		return nil, err
	}
	sniffed := http.DetectContentType(res.Body)
	if !slices.Contains(imageTypes, sniffed) {
		return nil, fmt.Errorf("GET %.300s: %w: the bytes are %s, not a PNG, JPEG, GIF or WebP image", res.URL, ErrContentType, sniffed)
	}
	res.ContentType = sniffed
	return res, nil
}

// mediaType is the media type of a Content-Type header, lower case and
// without parameters; "" when there is none or it does not parse.
func mediaType(header string) string {
	mt, _, err := mime.ParseMediaType(header)
	if err != nil {
		return ""
	}
	return mt
}

// accepts reports whether media type mt matches one of patterns:
// "type/subtype", "type/*" or "type/*+suffix".
func accepts(patterns []string, mt string) bool {
	typ, sub, ok := strings.Cut(mt, "/")
	if !ok || typ == "" || sub == "" {
		return false
	}
	for _, p := range patterns {
		ptyp, psub, _ := strings.Cut(strings.ToLower(p), "/")
		if ptyp != typ {
			continue
		}
		suffix, wild := strings.CutPrefix(psub, "*")
		switch {
		case !wild && psub == sub,
			wild && suffix == "",
			wild && strings.HasSuffix(sub, suffix) && len(sub) > len(suffix):
			return true
		}
	}
	return false
}

// acceptHeader is the Accept header for patterns: those HTTP's grammar can
// say ("type/*+suffix" cannot be).
func acceptHeader(patterns []string) string {
	var out []string
	for _, p := range patterns {
		if _, sub, _ := strings.Cut(p, "/"); sub == "*" || !strings.Contains(sub, "*") {
			out = append(out, p)
		}
	}
	return strings.Join(out, ", ")
}
