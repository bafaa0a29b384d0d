package commonschema_test

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/cvmgo/cvm/commonschema"
)

func ExampleHash() {
	tool := commonschema.Tool{
		Name:         "get_weather",
		InputSchema:  json.RawMessage(`{"type":"object","properties":{"location":{"type":"string","description":"City"}},"required":["location"]}`),
		OutputSchema: json.RawMessage(`{"type":"object","properties":{"temperature":{"type":"number"}},"required":["temperature"]}`),
	}
	hash, err := commonschema.Hash(tool)
	if err != nil {
		panic(err)
	}
	fmt.Println(hash)
	// Output: cd9ff6d0cfdafbedb54e254ca249813f45eb5ae891a91b1e2f94f212f7bb0922
}

// A server declares a tool common: the hash goes into the tool's _meta and
// into the tags of its tools/list announcement.
func ExampleAnnotate() {
	tool := []byte(`{"name":"get_weather","description":"Weather now","inputSchema":{"type":"object","properties":{"location":{"type":"string"}},"required":["location"]}}`)
	annotated, hash, err := commonschema.Annotate(tool)
	if err != nil {
		panic(err)
	}
	fmt.Printf("%s\n", annotated)
	tags, _ := json.Marshal(commonschema.Tags([]commonschema.ToolHash{{Name: "get_weather", Hash: hash}}, []string{"weather"}))
	fmt.Printf("%s\n", tags)
	// Output:
	// {"_meta":{"io.contextvm/common-schema":{"schemaHash":"e4e76a3da683d92b15013997f08eee2018c49074a28e726e277c32fde0dd5783"}},"description":"Weather now","inputSchema":{"type":"object","properties":{"location":{"type":"string"}},"required":["location"]},"name":"get_weather"}
	// [["i","e4e76a3da683d92b15013997f08eee2018c49074a28e726e277c32fde0dd5783","get_weather"],["k","io.contextvm/common-schema"],["t","weather"]]
}

// A client checks a claim before treating a tool as an implementation of a
// common schema. This tool claims get_weather's schema but does not require a
// location.
func ExampleVerifyClaim() {
	tool := []byte(`{"name":"get_weather","inputSchema":{"type":"object"},"_meta":{"io.contextvm/common-schema":{"schemaHash":"e4e76a3da683d92b15013997f08eee2018c49074a28e726e277c32fde0dd5783"}}}`)
	_, err := commonschema.VerifyClaim(tool)
	switch {
	case errors.Is(err, commonschema.ErrNoClaim):
		fmt.Println("bespoke tool")
	case errors.Is(err, commonschema.ErrHashMismatch):
		fmt.Println("warning:", err)
	case err != nil:
		fmt.Println("cannot verify:", err)
	default:
		fmt.Println("verified")
	}
	// Output: warning: schema hash mismatch: tool "get_weather" claims "e4e76a3da683d92b15013997f08eee2018c49074a28e726e277c32fde0dd5783", its schemas hash to 4766bda79719fc0f64c2755389a9543d3fd4f622456091057c0995fe1a9790ee
}
