package cashu

// The JSON bodies of the mint's HTTP API (NUT-00 to NUT-07, NUT-12,
// NUT-23's bolt11 method). Field names and omissions follow the NUTs; the
// mint (package payments/cashu/mint) and a wallet read and write these.

// BlindedMessage is an output a wallet asks the mint to sign (NUT-00).
type BlindedMessage struct {
	Amount uint64 `json:"amount"`
	ID     string `json:"id"`
	B      string `json:"B_"`
}

// BlindSignature is the mint's signature on a BlindedMessage, with the
// NUT-12 proof that it used the key it publishes for the amount.
type BlindSignature struct {
	Amount uint64 `json:"amount"`
	ID     string `json:"id"`
	C      string `json:"C_"`
	DLEQ   *DLEQ  `json:"dleq,omitempty"`
}

// DLEQ is a NUT-12 proof: e and s, and in a Proof also the wallet's
// blinding factor r, so that whoever receives the proof can check it.
type DLEQ struct {
	E string `json:"e"`
	S string `json:"s"`
	R string `json:"r,omitempty"`
}

// Proof is one unit of ecash (NUT-00). Secret and C together spend it:
// its String, GoString and LogValue (proof.go) show neither.
type Proof struct {
	Amount  uint64 `json:"amount"`
	ID      string `json:"id"`
	Secret  string `json:"secret"`
	C       string `json:"C"`
	DLEQ    *DLEQ  `json:"dleq,omitempty"`
	Witness string `json:"witness,omitempty"`
}

// Keys maps each amount to the hex public key that signs it (NUT-01).
type Keys map[uint64]string

// KeysetKeys is one keyset in GET /v1/keys and /v1/keys/{id} (NUT-01).
type KeysetKeys struct {
	ID   string `json:"id"`
	Unit string `json:"unit"`
	Keys Keys   `json:"keys"`
}

// KeysResponse is the body of GET /v1/keys (NUT-01).
type KeysResponse struct {
	Keysets []KeysetKeys `json:"keysets"`
}

// KeysetInfo is one keyset in GET /v1/keysets (NUT-02).
type KeysetInfo struct {
	ID          string `json:"id"`
	Unit        string `json:"unit"`
	Active      bool   `json:"active"`
	InputFeePPK uint64 `json:"input_fee_ppk"`
}

// KeysetsResponse is the body of GET /v1/keysets (NUT-02).
type KeysetsResponse struct {
	Keysets []KeysetInfo `json:"keysets"`
}

// SwapRequest is the body of POST /v1/swap (NUT-03).
type SwapRequest struct {
	Inputs  []Proof          `json:"inputs"`
	Outputs []BlindedMessage `json:"outputs"`
}

// SwapResponse answers a SwapRequest: one signature per output, in order.
type SwapResponse struct {
	Signatures []BlindSignature `json:"signatures"`
}

// Quote states (NUT-04, NUT-05, NUT-23).
const (
	QuoteUnpaid  = "UNPAID"
	QuotePaid    = "PAID"
	QuoteIssued  = "ISSUED"
	QuotePending = "PENDING"
)

// MintQuoteBolt11Request is the body of POST /v1/mint/quote/bolt11.
type MintQuoteBolt11Request struct {
	Amount      uint64 `json:"amount"`
	Unit        string `json:"unit"`
	Description string `json:"description,omitempty"`
}

// MintQuoteBolt11Response is a mint quote: the invoice to pay and its
// state, UNPAID, PAID or ISSUED. Expiry is a Unix time or null.
type MintQuoteBolt11Response struct {
	Quote   string `json:"quote"`
	Request string `json:"request"`
	Amount  uint64 `json:"amount"`
	Unit    string `json:"unit"`
	State   string `json:"state"`
	Expiry  *int64 `json:"expiry"`
}

// MintBolt11Request is the body of POST /v1/mint/bolt11.
type MintBolt11Request struct {
	Quote   string           `json:"quote"`
	Outputs []BlindedMessage `json:"outputs"`
}

// MintBolt11Response answers a MintBolt11Request.
type MintBolt11Response struct {
	Signatures []BlindSignature `json:"signatures"`
}

// MeltQuoteBolt11Request is the body of POST /v1/melt/quote/bolt11.
type MeltQuoteBolt11Request struct {
	Request string `json:"request"`
	Unit    string `json:"unit"`
}

// MeltQuoteBolt11Response is a melt quote: what paying the invoice costs
// (amount plus fee_reserve) and its state, UNPAID, PENDING or PAID.
type MeltQuoteBolt11Response struct {
	Quote           string           `json:"quote"`
	Request         string           `json:"request"`
	Amount          uint64           `json:"amount"`
	Unit            string           `json:"unit"`
	FeeReserve      uint64           `json:"fee_reserve"`
	State           string           `json:"state"`
	Expiry          *int64           `json:"expiry"`
	PaymentPreimage *string          `json:"payment_preimage"`
	Change          []BlindSignature `json:"change,omitempty"`
}

// MeltBolt11Request is the body of POST /v1/melt/bolt11; Outputs are
// optional blank outputs for change (NUT-08).
type MeltBolt11Request struct {
	Quote   string           `json:"quote"`
	Inputs  []Proof          `json:"inputs"`
	Outputs []BlindedMessage `json:"outputs,omitempty"`
}

// Proof states (NUT-07).
const (
	StateUnspent = "UNSPENT"
	StatePending = "PENDING"
	StateSpent   = "SPENT"
)

// CheckStateRequest is the body of POST /v1/checkstate (NUT-07): the Y of
// each proof, hex, so the mint learns no secret.
type CheckStateRequest struct {
	Ys []string `json:"Ys"`
}

// ProofState is one answer of a CheckStateResponse.
type ProofState struct {
	Y       string  `json:"Y"`
	State   string  `json:"state"`
	Witness *string `json:"witness"`
}

// CheckStateResponse answers a CheckStateRequest, in its order.
type CheckStateResponse struct {
	States []ProofState `json:"states"`
}

// MintInfo is the body of GET /v1/info (NUT-06). Nuts maps a NUT number
// to its settings object.
type MintInfo struct {
	Name            string         `json:"name,omitempty"`
	Pubkey          string         `json:"pubkey,omitempty"`
	Version         string         `json:"version,omitempty"`
	Description     string         `json:"description,omitempty"`
	DescriptionLong string         `json:"description_long,omitempty"`
	Contact         []ContactInfo  `json:"contact,omitempty"`
	Motd            string         `json:"motd,omitempty"`
	Time            int64          `json:"time,omitempty"`
	Nuts            map[string]any `json:"nuts"`
}

// ContactInfo is one way to reach a mint's operator (NUT-06).
type ContactInfo struct {
	Method string `json:"method"`
	Info   string `json:"info"`
}

// MethodSettings is the settings of NUT-04 (mint) or NUT-05 (melt) in
// MintInfo.Nuts.
type MethodSettings struct {
	Methods  []MethodSetting `json:"methods"`
	Disabled bool            `json:"disabled"`
}

// MethodSetting is one supported method and unit pair, with its limits.
type MethodSetting struct {
	Method    string         `json:"method"`
	Unit      string         `json:"unit"`
	MinAmount *uint64        `json:"min_amount,omitempty"`
	MaxAmount *uint64        `json:"max_amount,omitempty"`
	Options   map[string]any `json:"options,omitempty"`
}

// Supported is the settings of an optional NUT without options.
type Supported struct {
	Supported bool `json:"supported"`
}
