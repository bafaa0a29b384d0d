package did

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// Service types of an MCP server in a DID document.
const (
	// ServiceTypeMCP is written: seed 003 (NIP-10 §3.1) names it.
	ServiceTypeMCP = "MCPServiceV1"
	// ServiceTypeMCPNIP7 is accepted when reading: NIP-1 (and NIP-10 once
	// renamed NIP-7) call the same service so.
	ServiceTypeMCPNIP7 = "MCPServiceNIP7"
)

// Verification method types this package reads and writes.
const (
	TypeEd25519   = "Ed25519VerificationKey2020"
	TypeEd25519v1 = "Ed25519VerificationKey2018"
	TypeSecp256k1 = "EcdsaSecp256k1VerificationKey2019"
	TypeP256      = "EcdsaSecp256r1VerificationKey2019"
	// TypeSchnorr is a secp256k1 key that signs with BIP-340 Schnorr
	// (did:nostr); publicKeyMultibase holds its 32-byte x coordinate.
	TypeSchnorr = "SchnorrSecp256k1VerificationKey2019"
	// TypeMultikey carries the key type in publicKeyMultibase's multicodec
	// prefix.
	TypeMultikey = "Multikey"
	// TypeJWK carries the key as publicKeyJwk.
	TypeJWK = "JsonWebKey2020"
)

// Document is a DID document (DID Core §5), reduced to what
// authentication and service discovery read.
type Document struct {
	Context            any                  `json:"@context,omitempty"`
	ID                 string               `json:"id"`
	Controller         any                  `json:"controller,omitempty"`
	VerificationMethod []VerificationMethod `json:"verificationMethod,omitempty"`
	// Authentication lists the methods allowed to authenticate as ID:
	// references to VerificationMethod ids, or methods embedded here.
	Authentication  []Relationship `json:"authentication,omitempty"`
	AssertionMethod []Relationship `json:"assertionMethod,omitempty"`
	Service         []Service      `json:"service,omitempty"`
}

// VerificationMethod is a public key of a DID.
type VerificationMethod struct {
	ID                 string `json:"id"`
	Type               string `json:"type"`
	Controller         string `json:"controller,omitempty"`
	PublicKeyMultibase string `json:"publicKeyMultibase,omitempty"`
	PublicKeyJwk       *JWK   `json:"publicKeyJwk,omitempty"`
}

// JWK is the part of a JSON Web Key that names a public key (RFC 7517,
// RFC 8037 for OKP).
type JWK struct {
	Kty string `json:"kty"`
	Crv string `json:"crv"`
	X   string `json:"x"`
	Y   string `json:"y,omitempty"`
}

// Relationship is an entry of a verification relationship such as
// authentication: a reference to a method id, or an embedded method.
type Relationship struct {
	// Ref is the referenced method id, when the entry is a string.
	Ref string
	// Embedded is the method, when the entry is an object.
	Embedded *VerificationMethod
}

// ID is the id of the method the entry stands for.
func (r Relationship) ID() string {
	if r.Embedded != nil {
		return r.Embedded.ID
	}
	return r.Ref
}

// MarshalJSON writes a reference as a string, an embedded method as an
// object.
func (r Relationship) MarshalJSON() ([]byte, error) {
	if r.Embedded != nil {
		return json.Marshal(r.Embedded)
	}
	return json.Marshal(r.Ref)
}

// UnmarshalJSON reads either form.
func (r *Relationship) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '{' {
		var vm VerificationMethod
		if err := json.Unmarshal(b, &vm); err != nil {
			return err
		}
		*r = Relationship{Embedded: &vm}
		return nil
	}
	return json.Unmarshal(b, &r.Ref)
}

// Service is a service endpoint of a DID document.
type Service struct {
	ID string `json:"id"`
	// Type is the service's type. DID Core allows a set; when reading one,
	// Type is its first entry and Types all of them.
	Type  string   `json:"type"`
	Types []string `json:"-"`
	// ServiceEndpoint is the endpoint URL. DID Core also allows a map or a
	// set; those are kept in RawEndpoint and leave this empty.
	ServiceEndpoint string          `json:"serviceEndpoint"`
	RawEndpoint     json.RawMessage `json:"-"`
}

// UnmarshalJSON reads type as a string or a set, serviceEndpoint as a
// string or anything else (kept raw).
func (s *Service) UnmarshalJSON(b []byte) error {
	var raw struct {
		ID              string          `json:"id"`
		Type            json.RawMessage `json:"type"`
		ServiceEndpoint json.RawMessage `json:"serviceEndpoint"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	*s = Service{ID: raw.ID}
	var one string
	if err := json.Unmarshal(raw.Type, &one); err == nil {
		s.Type, s.Types = one, []string{one}
	} else if err := json.Unmarshal(raw.Type, &s.Types); err == nil && len(s.Types) > 0 {
		s.Type = s.Types[0]
	} else {
		return fmt.Errorf("service %q: type is neither a string nor a set of strings", s.ID)
	}
	if err := json.Unmarshal(raw.ServiceEndpoint, &s.ServiceEndpoint); err != nil {
		s.RawEndpoint = raw.ServiceEndpoint
	}
	return nil
}

// HasType reports whether the service is of type t.
func (s Service) HasType(t string) bool {
	if s.Type == t {
		return true
	}
	for _, x := range s.Types {
		if x == t {
			return true
		}
	}
	return false
}

// MCPEndpoints returns the endpoints of the document's MCP services (type
// MCPServiceV1 or MCPServiceNIP7), in document order.
func (d *Document) MCPEndpoints() []string {
	var out []string
	for _, s := range d.Service {
		if (s.HasType(ServiceTypeMCP) || s.HasType(ServiceTypeMCPNIP7)) && s.ServiceEndpoint != "" {
			out = append(out, s.ServiceEndpoint)
		}
	}
	return out
}

// Method returns the verification method with id keyID, looking in
// verificationMethod and in the methods embedded in authentication. A
// relative id (#frag) in the document is read against the document's id.
func (d *Document) Method(keyID string) (VerificationMethod, bool) {
	for _, vm := range d.VerificationMethod {
		if d.absolute(vm.ID) == keyID {
			return vm, true
		}
	}
	for _, r := range d.Authentication {
		if r.Embedded != nil && d.absolute(r.Embedded.ID) == keyID {
			return *r.Embedded, true
		}
	}
	return VerificationMethod{}, false
}

// Authenticates reports whether keyID is authorized for authentication.
func (d *Document) Authenticates(keyID string) bool {
	for _, r := range d.Authentication {
		if d.absolute(r.ID()) == keyID {
			return true
		}
	}
	return false
}

func (d *Document) absolute(id string) string {
	if strings.HasPrefix(id, "#") {
		return d.ID + id
	}
	return id
}

// ServerDocument returns the DID document a server publishes (at
// /.well-known/did.json for did:web): id, the signer's key as its
// verification method, authorized for authentication and assertion, and a
// service of type MCPServiceV1 at endpoint. id is the server's DID; empty
// means the signer's own DID (a did:web server passes its did:web and signs
// with a key of its own, whose method id is moved under the did:web).
func ServerDocument(id string, signer *KeySigner, endpoint string) *Document {
	if id == "" {
		id = signer.DID()
	}
	vm := signer.VerificationMethod()
	if id != signer.DID() {
		vm.ID = id + "#" + fragmentOf(signer.KeyID())
		vm.Controller = id
	}
	return &Document{
		Context:            []string{"https://www.w3.org/ns/did/v1"},
		ID:                 id,
		VerificationMethod: []VerificationMethod{vm},
		Authentication:     []Relationship{{Ref: vm.ID}},
		AssertionMethod:    []Relationship{{Ref: vm.ID}},
		Service: []Service{{
			ID:              id + "#mcp",
			Type:            ServiceTypeMCP,
			ServiceEndpoint: endpoint,
		}},
	}
}

func fragmentOf(keyID string) string {
	_, frag, _ := strings.Cut(keyID, "#")
	if frag == "" {
		return "key-1"
	}
	return frag
}

// Handler serves doc as JSON (application/did+json), for GET and HEAD: a
// server mounts it at /.well-known/did.json (did:web) so that clients can
// find its MCP endpoint and keys.
func Handler(doc *Document) http.Handler {
	body, _ := json.Marshal(doc) // a Document always encodes
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", "application/did+json")
		w.Header().Set("Cache-Control", "max-age=300")
		_, _ = w.Write(body)
	})
}
