package discovery

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/commonschema"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/nostrx"
)

// Server is one announced server as the catalog knows it.
type Server struct {
	Pubkey            nostr.PubKey `json:"pubkey"`
	Npub              string       `json:"npub"`
	Name              string       `json:"name"`
	About             string       `json:"about"`
	Website           string       `json:"website"`
	Picture           string       `json:"picture"`
	Encryption        bool         `json:"encryption"`
	EphemeralGiftWrap bool         `json:"ephemeralGiftWrap"`
	OversizedTransfer bool         `json:"oversizedTransfer"` // CEP-22
	OpenStreams       bool         `json:"openStreams"`       // CEP-41
	Relays            []string     `json:"relays"`
	// PriceWarnings are the cap tags that price nothing the server lists
	// and were left out.
	PriceWarnings []string  `json:"priceWarnings,omitempty"`
	UpdatedAt     time.Time `json:"updatedAt"`
	// ToolsAnnouncedAt is when the current tools announcement (kind 11317;
	// the 11316 without one) was signed: a server re-signs it when what it
	// serves changes. It is the server's own claim.
	ToolsAnnouncedAt time.Time      `json:"toolsAnnouncedAt"`
	ProtocolVersion  string         `json:"protocolVersion"`
	ServerInfo       Implementation `json:"serverInfo"`
	Categories       []string       `json:"categories"`
	Tools            []Tool         `json:"tools"`
	Resources        []Resource     `json:"resources"`
	Templates        []Template     `json:"templates"`
	Prompts          []Prompt       `json:"prompts"`
}

// Implementation is the serverInfo of an initialize result.
type Implementation struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// Tool is one announced tool.
type Tool struct {
	Name         string          `json:"name"`
	Description  string          `json:"description,omitempty"`
	Price        *Price          `json:"price"`
	InputSchema  json.RawMessage `json:"inputSchema,omitempty"`
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	// SchemaHash is the common schema the server claims for the tool, in its
	// _meta or an "i" tag; Verified says the tool's own schemas hash to it.
	SchemaHash  string `json:"schemaHash,omitempty"`
	Verified    bool   `json:"verified"`
	SchemaError string `json:"schemaError,omitempty"`

	raw json.RawMessage
}

// Resource is one announced resource.
type Resource struct {
	URI         string `json:"uri"`
	Name        string `json:"name,omitempty"`
	Description string `json:"description,omitempty"`
	MIMEType    string `json:"mimeType,omitempty"`
	Price       *Price `json:"price"`
}

// Template is one announced resource template.
type Template struct {
	URITemplate string `json:"uriTemplate"`
	Name        string `json:"name,omitempty"`
	Description string `json:"description,omitempty"`
	MIMEType    string `json:"mimeType,omitempty"`
}

// Prompt is one announced prompt.
type Prompt struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	Price       *Price `json:"price"`
}

// Skipped is an event, or a part of one, that the catalog left out.
type Skipped struct {
	Event  nostr.ID     `json:"id"`
	Pubkey nostr.PubKey `json:"pubkey"`
	Kind   nostr.Kind   `json:"kind"`
	Reason string       `json:"reason"`
}

// ErrSkipped is wrapped by the errors of Add for events it leaves out.
var ErrSkipped = errors.New("announcement skipped")

// maxSkipped bounds the skip log: a hostile relay must not grow it forever.
const maxSkipped = 1000

// Catalog is the set of servers known from their announcements. It is safe
// for concurrent use.
type Catalog struct {
	mu      sync.Mutex
	servers map[nostr.PubKey]*serverState
	skipped []Skipped
}

// NewCatalog returns an empty catalog.
func NewCatalog() *Catalog {
	return &Catalog{servers: make(map[nostr.PubKey]*serverState)}
}

// serverState is what the catalog holds of one author: the newest accepted
// event of each kind, parsed, and what deletions removed.
type serverState struct {
	events     map[nostr.Kind]nostr.Event
	deleted    map[nostr.Kind]nostr.Timestamp // versions up to this time are gone
	deletedIDs map[nostr.ID]bool              // events deleted by id, perhaps before they arrived
	init       *initResult
	tools      []Tool
	toolTags   nostr.Tags
	res        []Resource
	tmpl       []Template
	prompts    []Prompt
	relays     []string
}

type initResult struct {
	ProtocolVersion string          `json:"protocolVersion"`
	Capabilities    json.RawMessage `json:"capabilities"`
	ServerInfo      *Implementation `json:"serverInfo"`
}

// Add takes one event. It reports whether the catalog changed; an event
// older than what the catalog has is no change and no error. An event that
// cannot be used is recorded in Skipped and returned as an error wrapping
// ErrSkipped.
func (c *Catalog) Add(evt nostr.Event) (changed bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !evt.CheckID() || !evt.VerifySignature() {
		return false, c.skip(evt, "bad id or signature")
	}
	if evt.Kind == nostr.KindDeletion {
		return c.delete(evt), nil
	}
	if !slices.Contains(contextvm.AnnouncementKinds, evt.Kind) {
		return false, c.skip(evt, fmt.Sprintf("kind %d is not an announcement", evt.Kind))
	}
	s := c.servers[evt.PubKey]
	if s == nil {
		s = newServerState()
	}
	if evt.CreatedAt <= s.deleted[evt.Kind] || s.deletedIDs[evt.ID] {
		return false, nil // deleted already
	}
	if old, ok := s.events[evt.Kind]; ok && !newer(evt, old) {
		return false, nil
	}
	if err := c.parse(s, evt); err != nil {
		return false, c.skip(evt, err.Error())
	}
	s.events[evt.Kind] = evt
	c.servers[evt.PubKey] = s
	return true, nil
}

// newer reports whether a replaces b, as a relay decides for replaceable
// events: the later created_at, and on a tie the lower id.
func newer(a, b nostr.Event) bool {
	if a.CreatedAt != b.CreatedAt {
		return a.CreatedAt > b.CreatedAt
	}
	return a.ID.Hex() < b.ID.Hex()
}

func (c *Catalog) skip(evt nostr.Event, reason string) error {
	if len(c.skipped) < maxSkipped {
		c.skipped = append(c.skipped, Skipped{Event: evt.ID, Pubkey: evt.PubKey, Kind: evt.Kind, Reason: reason})
	}
	return fmt.Errorf("%w: kind %d %s: %s", ErrSkipped, evt.Kind, evt.ID.Hex(), reason)
}

// Skipped returns what the catalog left out, and why.
func (c *Catalog) Skipped() []Skipped {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.skipped)
}

// delete applies a kind 5 request to its author's announcements: those it
// names by id, and by address ("11316:<pubkey>:") every version up to its
// created_at.
func (c *Catalog) delete(del nostr.Event) bool {
	s := c.servers[del.PubKey]
	if s == nil {
		s = newServerState()
		c.servers[del.PubKey] = s
	}
	changed := false
	drop := func(kind nostr.Kind) {
		if _, ok := s.events[kind]; ok {
			delete(s.events, kind)
			s.clear(kind)
			changed = true
		}
	}
	for _, t := range del.Tags {
		if len(t) < 2 {
			continue
		}
		switch t[0] {
		case "e":
			id, err := nostr.IDFromHex(t[1])
			if err != nil {
				continue
			}
			if len(s.deletedIDs) < maxDeletedIDs {
				s.deletedIDs[id] = true
			}
			for kind, e := range s.events {
				if e.ID == id {
					drop(kind)
				}
			}
		case "a":
			parts := strings.SplitN(t[1], ":", 3)
			if len(parts) != 3 || parts[1] != del.PubKey.Hex() || parts[2] != "" {
				continue
			}
			k, err := strconv.Atoi(parts[0])
			kind := nostr.Kind(k)
			if err != nil || !slices.Contains(contextvm.AnnouncementKinds, kind) {
				continue
			}
			s.deleted[kind] = max(s.deleted[kind], del.CreatedAt)
			if e, ok := s.events[kind]; ok && e.CreatedAt <= del.CreatedAt {
				drop(kind)
			}
		}
	}
	return changed
}

// maxDeletedIDs bounds the ids remembered per author.
const maxDeletedIDs = 1000

func newServerState() *serverState {
	return &serverState{
		events:     make(map[nostr.Kind]nostr.Event),
		deleted:    make(map[nostr.Kind]nostr.Timestamp),
		deletedIDs: make(map[nostr.ID]bool),
	}
}

func (s *serverState) clear(kind nostr.Kind) {
	switch kind {
	case contextvm.KindServerAnnouncement:
		s.init = nil
	case contextvm.KindToolsList:
		s.tools, s.toolTags = nil, nil
	case contextvm.KindResourcesList:
		s.res = nil
	case contextvm.KindResourceTemplatesList:
		s.tmpl = nil
	case contextvm.KindPromptsList:
		s.prompts = nil
	case contextvm.KindRelayList:
		s.relays = nil
	}
}

// parse reads evt into s, or says what is wrong with it.
func (c *Catalog) parse(s *serverState, evt nostr.Event) error {
	switch evt.Kind {
	case contextvm.KindServerAnnouncement:
		var init initResult
		if err := json.Unmarshal([]byte(evt.Content), &init); err != nil {
			return fmt.Errorf("content is not an initialize result: %v", err)
		}
		if init.ServerInfo == nil || init.ServerInfo.Name == "" || init.ProtocolVersion == "" {
			return errors.New("initialize result without serverInfo.name or protocolVersion")
		}
		s.init = &init
	case contextvm.KindToolsList:
		var list struct {
			Tools []json.RawMessage `json:"tools"`
		}
		if err := json.Unmarshal([]byte(evt.Content), &list); err != nil || list.Tools == nil {
			return fmt.Errorf("content is not a tools/list result: %v", cmp.Or(err, errors.New(`no "tools" array`)))
		}
		tools := make([]Tool, 0, len(list.Tools))
		for _, raw := range list.Tools {
			t, err := parseTool(raw, evt.Tags)
			if err != nil {
				c.skip(evt, "a tool: "+err.Error())
				continue
			}
			tools = append(tools, t)
		}
		s.tools, s.toolTags = tools, evt.Tags
	case contextvm.KindResourcesList:
		var list struct {
			Resources []Resource `json:"resources"`
		}
		if err := json.Unmarshal([]byte(evt.Content), &list); err != nil || list.Resources == nil {
			return fmt.Errorf("content is not a resources/list result: %v", cmp.Or(err, errors.New(`no "resources" array`)))
		}
		s.res = slices.DeleteFunc(list.Resources, func(r Resource) bool { return r.URI == "" })
	case contextvm.KindResourceTemplatesList:
		var list struct {
			Templates []Template `json:"resourceTemplates"`
		}
		if err := json.Unmarshal([]byte(evt.Content), &list); err != nil || list.Templates == nil {
			return fmt.Errorf("content is not a resources/templates/list result: %v", cmp.Or(err, errors.New(`no "resourceTemplates" array`)))
		}
		s.tmpl = slices.DeleteFunc(list.Templates, func(t Template) bool { return t.URITemplate == "" })
	case contextvm.KindPromptsList:
		var list struct {
			Prompts []Prompt `json:"prompts"`
		}
		if err := json.Unmarshal([]byte(evt.Content), &list); err != nil || list.Prompts == nil {
			return fmt.Errorf("content is not a prompts/list result: %v", cmp.Or(err, errors.New(`no "prompts" array`)))
		}
		s.prompts = slices.DeleteFunc(list.Prompts, func(p Prompt) bool { return p.Name == "" })
	case contextvm.KindRelayList:
		var relays []string
		for _, t := range evt.Tags {
			if len(t) >= 2 && t[0] == "r" {
				if u, err := url.Parse(t[1]); err == nil && (u.Scheme == "ws" || u.Scheme == "wss") && u.Host != "" {
					relays = append(relays, nostrx.NormalizeRelayURL(t[1]))
				}
			}
		}
		s.relays = relays
	}
	return nil
}

// parseTool reads one tool of a tools list and checks the common schema it
// claims, in its _meta or in an ["i", hash, name] tag of the list.
func parseTool(raw json.RawMessage, tags nostr.Tags) (Tool, error) {
	var t Tool
	if err := json.Unmarshal(raw, &t); err != nil {
		return Tool{}, fmt.Errorf("not a tool object: %v", err)
	}
	if t.Name == "" {
		return Tool{}, errors.New("a tool without a name")
	}
	t.raw = raw
	t.Price = nil // prices come from tags, not from the tool object
	claimed, _ := commonschema.Claimed(raw)
	tagged := ""
	for _, tag := range tags {
		if len(tag) >= 3 && tag[0] == "i" && tag[2] == t.Name {
			tagged = tag[1]
		}
	}
	t.SchemaHash = cmp.Or(claimed, tagged)
	switch {
	case t.SchemaHash == "":
	case claimed != "" && tagged != "" && claimed != tagged:
		t.SchemaError = fmt.Sprintf("the tool's _meta claims %s but the announcement's i tag says %s", claimed, tagged)
	default:
		var st commonschema.Tool
		err := json.Unmarshal(raw, &st)
		if err == nil {
			err = commonschema.Verify(st, t.SchemaHash)
		}
		if err != nil {
			t.SchemaError = err.Error()
		} else {
			t.Verified = true
		}
	}
	return t, nil
}

// server builds the listing of one author, or nil without a usable 11316.
func (s *serverState) server(pk nostr.PubKey) *Server {
	if s.init == nil {
		return nil
	}
	initEvt := s.events[contextvm.KindServerAnnouncement]
	srv := &Server{
		Pubkey:          pk,
		Npub:            nostrx.EncodeNpub(pk),
		ProtocolVersion: s.init.ProtocolVersion,
		ServerInfo:      *s.init.ServerInfo,
		Relays:          orEmpty(slices.Clone(s.relays)),
		Categories:      []string{},
	}
	var updated nostr.Timestamp
	for _, e := range s.events {
		updated = max(updated, e.CreatedAt)
	}
	srv.UpdatedAt = updated.Time().UTC()
	srv.ToolsAnnouncedAt = initEvt.CreatedAt.Time().UTC()
	if e, ok := s.events[contextvm.KindToolsList]; ok {
		srv.ToolsAnnouncedAt = e.CreatedAt.Time().UTC()
	}
	for _, t := range initEvt.Tags {
		switch {
		case len(t) == 1 && t[0] == contextvm.TagSupportEncryption:
			srv.Encryption = true
		case len(t) == 1 && t[0] == contextvm.TagSupportEncryptionEphemeral:
			srv.EphemeralGiftWrap = true
		case len(t) == 1 && t[0] == contextvm.TagSupportOversizedTransfer:
			srv.OversizedTransfer = true
		case len(t) == 1 && t[0] == contextvm.TagSupportOpenStream:
			srv.OpenStreams = true
		case len(t) >= 2 && t[0] == contextvm.TagName:
			srv.Name = t[1]
		case len(t) >= 2 && t[0] == contextvm.TagAbout:
			srv.About = t[1]
		case len(t) >= 2 && t[0] == contextvm.TagWebsite:
			srv.Website = t[1]
		case len(t) >= 2 && t[0] == contextvm.TagPicture:
			srv.Picture = t[1]
		}
	}
	srv.Name = cmp.Or(srv.Name, srv.ServerInfo.Name)
	priced, warnings := s.prices()
	srv.PriceWarnings = warnings
	for _, t := range s.toolTags {
		if len(t) >= 2 && t[0] == "t" && !slices.Contains(srv.Categories, t[1]) {
			srv.Categories = append(srv.Categories, t[1])
		}
	}
	srv.Tools = make([]Tool, len(s.tools))
	for i, t := range s.tools {
		t.Price = priced["tool:"+t.Name]
		srv.Tools[i] = t
	}
	srv.Resources = make([]Resource, len(s.res))
	for i, r := range s.res {
		r.Price = priced["resource:"+r.URI]
		srv.Resources[i] = r
	}
	srv.Templates = orEmpty(slices.Clone(s.tmpl))
	srv.Prompts = make([]Prompt, len(s.prompts))
	for i, p := range s.prompts {
		p.Price = priced["prompt:"+p.Name]
		srv.Prompts[i] = p
	}
	return srv
}

func orEmpty[T any](xs []T) []T {
	if xs == nil {
		return []T{}
	}
	return xs
}

// Server returns the listing of one server, if the catalog has it.
func (c *Catalog) Server(pk nostr.PubKey) (Server, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.servers[pk]
	if s == nil {
		return Server{}, false
	}
	srv := s.server(pk)
	if srv == nil {
		return Server{}, false
	}
	return *srv, true
}

// Servers lists the servers that match f, by name and then public key.
func (c *Catalog) Servers(f Filter) []Server {
	c.mu.Lock()
	var out []Server
	for pk, s := range c.servers {
		if srv := s.server(pk); srv != nil && f.Match(*srv) {
			out = append(out, *srv)
		}
	}
	c.mu.Unlock()
	slices.SortFunc(out, func(a, b Server) int {
		return cmp.Or(strings.Compare(strings.ToLower(a.Name), strings.ToLower(b.Name)), strings.Compare(a.Pubkey.Hex(), b.Pubkey.Hex()))
	})
	return out
}
