package catalogpage

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/internal/webui"
	"github.com/cvmgo/cvm/social"
)

// Social gives the page what people say around a server (CEP-23's profile
// and notes, CEP-24's reviews) and publishes its operator's reviews. Its
// methods may be called concurrently, each bounded by its ctx.
type Social interface {
	// About reads server's profile, notes and review threads.
	About(ctx context.Context, server nostr.PubKey) (About, error)
	// PostReview signs a review with the page's identity and publishes
	// it, returning its id. Called only after the person confirmed it.
	PostReview(ctx context.Context, r ReviewRequest) (nostr.ID, error)
}

// About is what the page shows of a server besides its announcement.
type About struct {
	Profile       *social.Profile     `json:"profile,omitempty"`
	NIP05Verified bool                `json:"nip05Verified"`
	Notes         []social.Note       `json:"notes"`
	Reviews       []social.ThreadView `json:"reviews"`
	// Reviewer is the npub the operator's reviews are signed with; ""
	// when this page posts none.
	Reviewer string `json:"reviewer,omitempty"`
}

// ReviewRequest is a review the operator confirmed on the page.
type ReviewRequest struct {
	Server  nostr.PubKey
	Rating  int // 0: none
	Content string
}

// Codes of the social endpoints' errors (docs/error-codes.md).
const (
	CodeSocialDisabled = "social_disabled" // 404: this catalog shows no profiles or reviews
	CodeConfirmReview  = "confirm_review"  // 202: the review is not published until the person confirms it (the body has a quote)
	CodeBadReview      = "bad_review"      // 400: empty or oversized text, a rating out of 1..5
	CodeRelayFailed    = "relay_failed"    // 502: the relays did not answer, or took no review
)

// aboutTimeout bounds reading a server's profile, notes and reviews.
const aboutTimeout = 10 * time.Second

// quoteUnitReview marks the quotes of reviews, apart from payments'.
const quoteUnitReview = "review"

func (p *Page) serveAbout(w http.ResponseWriter, r *http.Request) {
	if p.opts.Social == nil {
		webui.WriteError(w, http.StatusNotFound, CodeSocialDisabled, "this catalog shows no profiles or reviews")
		return
	}
	pk, ok := p.catalogServer(w, r.PathValue("pubkey"))
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), aboutTimeout)
	defer cancel()
	about, err := p.opts.Social.About(ctx, pk)
	if err != nil {
		webui.WriteError(w, http.StatusBadGateway, CodeRelayFailed, "could not read the server's profile and reviews: "+err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(about)
}

// catalogServer reads a server's key in hex (strictly: nostr's decoder
// takes any byte for a digit) and checks that the catalog lists it,
// answering the request when not.
func (p *Page) catalogServer(w http.ResponseWriter, v string) (nostr.PubKey, bool) {
	var pk nostr.PubKey
	if len(v) != 64 || strings.ToLower(v) != v {
		webui.WriteError(w, http.StatusBadRequest, CodeBadRequest, "server must be a public key in hex")
		return pk, false
	}
	if _, err := hex.Decode(pk[:], []byte(v)); err != nil {
		webui.WriteError(w, http.StatusBadRequest, CodeBadRequest, "server must be a public key in hex")
		return pk, false
	}
	if _, ok := p.opts.Catalog.Server(pk); !ok {
		webui.WriteError(w, http.StatusNotFound, CodeUnknownServer, "this server is not in the catalog (any more)")
		return pk, false
	}
	return pk, true
}

type reviewBody struct {
	Server  string `json:"server"`
	Rating  int    `json:"rating"`
	Content string `json:"content"`
	Quote   string `json:"quote"`
}

// serveReview publishes the operator's review of a server, signed by the
// page's identity, guarded as "try it" is (same origin, the page token, a
// JSON body) and, like a payment, only once the person confirmed it: the
// first request is answered 202 with a single-use quote for exactly this
// review, and only a second request carrying it publishes.
func (p *Page) serveReview(w http.ResponseWriter, r *http.Request) {
	if p.opts.Social == nil {
		webui.WriteError(w, http.StatusNotFound, CodeSocialDisabled, "this catalog posts no reviews")
		return
	}
	if !p.guardPost(w, r) {
		return
	}
	var body reviewBody
	if err := json.NewDecoder(io.LimitReader(r.Body, maxCallBody)).Decode(&body); err != nil {
		webui.WriteError(w, http.StatusBadRequest, CodeBadRequest, "the review is not valid JSON: "+err.Error())
		return
	}
	pk, ok := p.catalogServer(w, body.Server)
	if !ok {
		return
	}
	if err := checkReview(body); err != nil {
		webui.WriteError(w, http.StatusBadRequest, CodeBadReview, err.Error())
		return
	}
	key := fmt.Sprintf("review\n%s\n%d\n%s", pk.Hex(), body.Rating, body.Content)
	if body.Quote == "" {
		s, _ := p.opts.Catalog.Server(pk)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		json.NewEncoder(w).Encode(map[string]any{"code": CodeConfirmReview, "quote": p.newQuote(key, 0, quoteUnitReview),
			"message": fmt.Sprintf("Publish this review of %s for anyone to read, signed by this catalog's identity?", orNpub(s.Name, s.Npub))})
		return
	}
	if !p.takeQuote(body.Quote, key, 0, quoteUnitReview) {
		webui.WriteError(w, http.StatusConflict, CodeBadQuote, "the confirmation is unknown, used, expired, or for another review; confirm again")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), aboutTimeout)
	defer cancel()
	id, err := p.opts.Social.PostReview(ctx, ReviewRequest{Server: pk, Rating: body.Rating, Content: body.Content})
	if err != nil {
		p.log.Warn("review not published", "server", pk.Hex(), "err", err)
		webui.WriteError(w, http.StatusBadGateway, CodeRelayFailed, "the review was not published: "+err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	json.NewEncoder(w).Encode(map[string]string{"id": id.Hex()})
}

func checkReview(b reviewBody) error {
	switch {
	case strings.TrimSpace(b.Content) == "":
		return errors.New("write something to publish")
	case len(b.Content) > social.MaxReviewContent || !utf8.ValidString(b.Content):
		return fmt.Errorf("a review is at most %d bytes of text", social.MaxReviewContent)
	case b.Rating < 0 || b.Rating > social.MaxRating:
		return fmt.Errorf("a rating is 1 to %d, or none", social.MaxRating)
	}
	return nil
}

func orNpub(name, npub string) string {
	if name != "" {
		return name + " (" + npub + ")"
	}
	return npub
}
