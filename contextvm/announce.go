package contextvm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/commonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Public announcements (CEP-6, CEP-17): a server that wants to be found
// publishes its initialize result (kind 11316) and its lists of tools,
// resources, resource templates and prompts (11317–11320), all pages merged,
// plus its relay list (10002). They are replaceable events, never encrypted,
// and go only to the server's own relays. Each carries the prices (cap tags)
// of its kind of capability; 11317 also carries the CEP-15 tags of the tools
// declared common.

// AnnouncementSource gives the lists a server announces. An
// *mcp.ClientSession connected to the server is one.
type AnnouncementSource interface {
	InitializeResult() *mcp.InitializeResult
	ListTools(context.Context, *mcp.ListToolsParams) (*mcp.ListToolsResult, error)
	ListResources(context.Context, *mcp.ListResourcesParams) (*mcp.ListResourcesResult, error)
	ListResourceTemplates(context.Context, *mcp.ListResourceTemplatesParams) (*mcp.ListResourceTemplatesResult, error)
	ListPrompts(context.Context, *mcp.ListPromptsParams) (*mcp.ListPromptsResult, error)
}

// AnnouncementKinds are the kinds a server announces itself with, the
// relay list included: what Unannounce deletes.
var AnnouncementKinds = []nostr.Kind{
	KindServerAnnouncement, KindToolsList, KindResourcesList, KindResourceTemplatesList, KindPromptsList, KindRelayList,
}

// maxListPages bounds the pages read from one list: a server whose cursors
// never end must not keep the announcer busy forever.
const maxListPages = 1000

// announcer remembers what was last published, so that an unchanged
// announcement is not published again and a changed one always replaces it.
type announcer struct {
	mu        sync.Mutex // held for a whole Announce: announcements go out in order
	published map[nostr.Kind]nostr.Event
	last      nostr.Timestamp
}

// Announce publishes the server's announcements from src: its initialize
// result, every list it has capabilities for, and its relay list (unless
// ServerOptions.NoRelayList). Announcements that have not changed since
// the last call are not published again. Serve calls it when
// ServerOptions.Announce is set, and again whenever a list changes; a server
// run with Accept calls it itself.
func (s *Server) Announce(ctx context.Context, src AnnouncementSource) error {
	drafts, err := s.announcementDrafts(ctx, src)
	if err != nil {
		return err
	}
	a := &s.announcer
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.published == nil {
		a.published = make(map[nostr.Kind]nostr.Event)
	}
	// A replacement must be newer than what it replaces: two announcements
	// within one second would otherwise tie, and a tie keeps the lower id.
	created := max(nostr.Now(), a.last+1)
	var errs []error
	for _, d := range drafts {
		if old, ok := a.published[d.Kind]; ok && old.Content == d.Content && slices.EqualFunc(old.Tags, d.Tags, slices.Equal) {
			continue
		}
		d.CreatedAt = created
		if err := s.signer.SignEvent(ctx, &d); err != nil {
			return fmt.Errorf("contextvm: sign announcement %d: %w", d.Kind, err)
		}
		if err := s.publishAnnouncement(ctx, d); err != nil {
			errs = append(errs, fmt.Errorf("announcement %d: %w", d.Kind, err))
			continue
		}
		a.published[d.Kind] = d
		a.last = created
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("contextvm: announce: %w", err)
	}
	return nil
}

// publishAnnouncement publishes one announcement to the server's relays
// and to its announce relays, at once. It counts as published only when
// both took it: a failed one is retried whole, and a relay that has it
// already answers the repeat as a duplicate.
func (s *Server) publishAnnouncement(ctx context.Context, evt nostr.Event) error {
	if s.announcePool == nil {
		return s.pool.Publish(ctx, evt)
	}
	var own, extra error
	var wg sync.WaitGroup
	wg.Go(func() { own = s.pool.Publish(ctx, evt) })
	extra = s.announcePool.Publish(ctx, evt)
	wg.Wait()
	if extra != nil {
		extra = fmt.Errorf("announce relays: %w", extra)
	}
	return errors.Join(own, extra)
}

// Unannounce deletes the server's announcements (see the package function)
// from its relays and its announce relays.
func (s *Server) Unannounce(ctx context.Context) (int, error) {
	s.announcer.mu.Lock()
	defer s.announcer.mu.Unlock()
	known := make([]nostr.ID, 0, len(s.announcer.published))
	for _, e := range s.announcer.published {
		known = append(known, e.ID)
	}
	n, err := unannounce(ctx, s.pool, s.signer, known)
	if s.announcePool != nil {
		m, aerr := unannounce(ctx, s.announcePool, s.signer, known)
		n = max(n, m)
		if aerr != nil {
			err = errors.Join(err, fmt.Errorf("announce relays: %w", aerr))
		}
	}
	if err == nil {
		clear(s.announcer.published)
	}
	return n, err
}

// announcementDrafts builds the unsigned announcement events.
func (s *Server) announcementDrafts(ctx context.Context, src AnnouncementSource) ([]nostr.Event, error) {
	init := src.InitializeResult()
	if init == nil {
		return nil, errors.New("contextvm: announce: the source has no initialize result")
	}
	o := s.opts
	var drafts []nostr.Event
	add := func(kind nostr.Kind, content any, tags nostr.Tags) error {
		data, err := json.Marshal(content)
		if err != nil {
			return fmt.Errorf("contextvm: announcement %d: %w", kind, err)
		}
		if tags == nil {
			tags = nostr.Tags{}
		}
		drafts = append(drafts, nostr.Event{Kind: kind, Content: string(data), Tags: tags})
		return nil
	}
	tags := serverDiscoveryTags(o.Info, o.Encryption, o.GiftWrap, o.OversizedThreshold > 0, o.OpenStreams)
	if s.gate != nil {
		tags = append(tags, s.gate.Tags()...)
	}
	if err := add(KindServerAnnouncement, init, append(tags, priceTags(o.Prices)...)); err != nil {
		return nil, err
	}
	caps := init.Capabilities
	if caps == nil {
		caps = &mcp.ServerCapabilities{}
	}
	if caps.Tools != nil {
		tools, err := allPages(ctx, func(ctx context.Context, cursor string) ([]*mcp.Tool, string, error) {
			r, err := src.ListTools(ctx, &mcp.ListToolsParams{Cursor: cursor})
			if err != nil {
				return nil, "", err
			}
			return r.Tools, r.NextCursor, nil
		})
		if err != nil {
			return nil, fmt.Errorf("contextvm: announce: tools/list: %w", err)
		}
		raw, err := marshalEach(tools)
		if err != nil {
			return nil, err
		}
		raw, common := s.annotateCommon(raw)
		if err := add(KindToolsList, map[string]any{"tools": raw}, s.toolListTags(common)); err != nil {
			return nil, err
		}
	}
	if caps.Resources != nil {
		resources, err := allPages(ctx, func(ctx context.Context, cursor string) ([]*mcp.Resource, string, error) {
			r, err := src.ListResources(ctx, &mcp.ListResourcesParams{Cursor: cursor})
			if err != nil {
				return nil, "", err
			}
			return r.Resources, r.NextCursor, nil
		})
		if err != nil {
			return nil, fmt.Errorf("contextvm: announce: resources/list: %w", err)
		}
		if err := add(KindResourcesList, map[string]any{"resources": orEmpty(resources)}, priceTags(o.Prices, "resource")); err != nil {
			return nil, err
		}
		templates, err := allPages(ctx, func(ctx context.Context, cursor string) ([]*mcp.ResourceTemplate, string, error) {
			r, err := src.ListResourceTemplates(ctx, &mcp.ListResourceTemplatesParams{Cursor: cursor})
			if err != nil {
				return nil, "", err
			}
			return r.ResourceTemplates, r.NextCursor, nil
		})
		switch {
		case isMethodNotFound(err):
			// A server with resources need not have templates.
		case err != nil:
			return nil, fmt.Errorf("contextvm: announce: resources/templates/list: %w", err)
		default:
			if err := add(KindResourceTemplatesList, map[string]any{"resourceTemplates": orEmpty(templates)}, priceTags(o.Prices, "resource")); err != nil {
				return nil, err
			}
		}
	}
	if caps.Prompts != nil {
		prompts, err := allPages(ctx, func(ctx context.Context, cursor string) ([]*mcp.Prompt, string, error) {
			r, err := src.ListPrompts(ctx, &mcp.ListPromptsParams{Cursor: cursor})
			if err != nil {
				return nil, "", err
			}
			return r.Prompts, r.NextCursor, nil
		})
		if err != nil {
			return nil, fmt.Errorf("contextvm: announce: prompts/list: %w", err)
		}
		if err := add(KindPromptsList, map[string]any{"prompts": orEmpty(prompts)}, priceTags(o.Prices, "prompt")); err != nil {
			return nil, err
		}
	}
	if !o.NoRelayList {
		var relays nostr.Tags
		for _, u := range s.pool.Relays() {
			relays = append(relays, nostr.Tag{"r", u})
		}
		drafts = append(drafts, nostr.Event{Kind: KindRelayList, Tags: relays})
	}
	return drafts, nil
}

// allPages reads every page of a paginated list.
func allPages[T any](ctx context.Context, page func(ctx context.Context, cursor string) ([]T, string, error)) ([]T, error) {
	var all []T
	cursor := ""
	for range maxListPages {
		items, next, err := page(ctx, cursor)
		if err != nil {
			return nil, err
		}
		all = append(all, items...)
		if next == "" {
			return all, nil
		}
		cursor = next
	}
	return nil, fmt.Errorf("more than %d pages", maxListPages)
}

func orEmpty[T any](xs []T) []T {
	if xs == nil {
		return []T{}
	}
	return xs
}

func isMethodNotFound(err error) bool {
	var werr *jsonrpc.Error
	return errors.As(err, &werr) && werr.Code == jsonrpc.CodeMethodNotFound
}

func marshalEach[T any](xs []T) ([]json.RawMessage, error) {
	out := make([]json.RawMessage, 0, len(xs))
	for _, x := range xs {
		b, err := json.Marshal(x)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

// annotateCommon writes the schema hash into each tool the server declares
// common (ServerOptions.CommonTools) and returns the tools with their hashes.
// A tool that cannot be hashed is left as it is, with a log line: it is not
// advertised as common rather than advertised with a hash nobody can verify.
func (s *Server) annotateCommon(tools []json.RawMessage) ([]json.RawMessage, []commonschema.ToolHash) {
	if len(s.opts.CommonTools) == 0 {
		return tools, nil
	}
	var hashes []commonschema.ToolHash
	for i, raw := range tools {
		var t struct {
			Name string `json:"name"`
		}
		if json.Unmarshal(raw, &t) != nil || !slices.Contains(s.opts.CommonTools, t.Name) {
			continue
		}
		annotated, hash, err := commonschema.Annotate(raw)
		if err != nil {
			s.log.Warn("tool declared common cannot be hashed; not advertising it as common", "tool", t.Name, "err", err)
			continue
		}
		tools[i] = annotated
		hashes = append(hashes, commonschema.ToolHash{Name: t.Name, Hash: hash})
	}
	return tools, hashes
}

// toolListTags are the tags of a tools list, announced or answered: the
// tool prices and the CEP-15 tags of its common tools.
func (s *Server) toolListTags(common []commonschema.ToolHash) nostr.Tags {
	return append(priceTags(s.opts.Prices, "tool"), commonschema.Tags(common, s.opts.ToolCategories)...)
}

// decorateList adds to a list response what the announcements carry: prices
// on every list, and on tools/list the common-schema hashes in the tools'
// _meta and the CEP-15 tags, as the reference does.
func (s *Server) decorateList(method string, resp *jsonrpc.Response) (*jsonrpc.Response, nostr.Tags) {
	if resp.Error != nil {
		return resp, nil
	}
	switch method {
	case "resources/list", "resources/templates/list":
		return resp, priceTags(s.opts.Prices, "resource")
	case "prompts/list":
		return resp, priceTags(s.opts.Prices, "prompt")
	case "tools/list":
	default:
		return resp, nil
	}
	if len(s.opts.CommonTools) == 0 {
		return resp, s.toolListTags(nil)
	}
	var result map[string]json.RawMessage
	var tools []json.RawMessage
	if json.Unmarshal(resp.Result, &result) != nil || json.Unmarshal(result["tools"], &tools) != nil {
		return resp, s.toolListTags(nil)
	}
	tools, common := s.annotateCommon(tools)
	var err error
	if result["tools"], err = json.Marshal(tools); err != nil {
		return resp, s.toolListTags(nil)
	}
	out := *resp
	if out.Result, err = json.Marshal(result); err != nil {
		return resp, s.toolListTags(nil)
	}
	return &out, s.toolListTags(common)
}

// announceDebounce gathers a burst of list_changed notifications into one
// re-announcement.
const announceDebounce = 200 * time.Millisecond

// announceServer keeps srv's announcements current: it connects a client to
// srv in memory, announces, and announces again after every list_changed,
// until ctx (Serve's) or life (the server's intake) ends. The reference
// announces once.
func (s *Server) announceServer(ctx, life context.Context, srv *mcp.Server) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(life, cancel)()
	client, changed := NewAnnouncementClient()
	ct, st := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		s.log.Error("announcements: cannot reach the MCP server", "err", err)
		return
	}
	defer ss.Close()
	cs, err := client.Connect(ctx, ct, &mcp.ClientSessionOptions{ProtocolVersion: ProtocolVersion})
	if err != nil {
		s.log.Error("announcements: cannot initialize the MCP server", "err", err)
		return
	}
	defer cs.Close()
	s.KeepAnnounced(ctx, cs, changed)
}

// NewAnnouncementClient returns a go-sdk client to read a server's lists
// with, and the channel that receives when the server says a list changed:
// connect the client to the server and pass the session and the channel to
// KeepAnnounced.
func NewAnnouncementClient() (*mcp.Client, <-chan struct{}) {
	changed := make(chan struct{}, 1)
	signal := func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "cvm-announcer", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler:     func(context.Context, *mcp.ToolListChangedRequest) { signal() },
		PromptListChangedHandler:   func(context.Context, *mcp.PromptListChangedRequest) { signal() },
		ResourceListChangedHandler: func(context.Context, *mcp.ResourceListChangedRequest) { signal() },
	})
	return client, changed
}

// KeepAnnounced announces from src, then again each time changed receives
// (after a short pause that gathers bursts), until ctx ends. A failed
// announcement is logged and retried with backoff. Connect the source's
// client with list_changed handlers that send on changed.
//
// In a replica group, only the replica holding the group's announcer lease
// announces (Coordinator.Lead): this waits until it does, announces at
// once when it takes the lease over, and stops when it loses it.
func (s *Server) KeepAnnounced(ctx context.Context, src AnnouncementSource, changed <-chan struct{}) {
	s.replicas.Lead(ctx, func(ctx context.Context) { s.keepAnnounced(ctx, src, changed) })
}

func (s *Server) keepAnnounced(ctx context.Context, src AnnouncementSource, changed <-chan struct{}) {
	const firstRetry, maxRetry = time.Second, time.Minute
	backoff := firstRetry
	var retry <-chan time.Time
	for first := true; ; first = false {
		if !first {
			select {
			case <-ctx.Done():
				return
			case <-retry:
			case <-changed:
				select {
				case <-ctx.Done():
					return
				case <-time.After(announceDebounce):
				}
			}
		}
		actx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := s.Announce(actx, src)
		cancel()
		if err != nil {
			s.log.Warn("announcement failed; will retry", "err", err, "in", backoff)
			retry = time.After(backoff)
			backoff = min(2*backoff, maxRetry)
			continue
		}
		s.log.Info("announced", "pubkey", s.me.Hex())
		retry, backoff = nil, firstRetry
	}
}
