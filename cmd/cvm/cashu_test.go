package main

import (
	"strings"
	"testing"
)

// TestCashu_RefusalsSayWhatToDo: cvm cashu refuses, before any mint or
// wallet is reached, what cannot work, and says what to do; a malformed
// token is not echoed.
func TestCashu_RefusalsSayWhatToDo(t *testing.T) {
	c := newCLI(t)
	garbage := "cashuBnot-a-real-token-but-secret-looking-0123456789"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"cashu", "mint", "300"}, "needs --mint URL"},
		{[]string{"cashu", "mint", "--mint", "https://mint.example.com", "300"}, "give --max-sats 300"},
		{[]string{"cashu", "mint", "--mint", "https://mint.example.com", "--max-sats", "10", "300"}, "give --max-sats 300"},
		{[]string{"cashu", "mint", "--mint", "http://mint.example.com", "--max-sats", "300", "300"}, "plain http off loopback"},
		{[]string{"cashu", "mint", "--mint", "https://mint.example.com", "--max-sats", "300", "300"}, "give --wallet-file FILE"},
		{[]string{"cashu", "mint", "--mint", "https://mint.example.com", "0"}, "whole number above zero"},
		{[]string{"cashu", "send", "5"}, "holds no proofs; get some with cvm cashu mint"},
		{[]string{"cashu", "receive", "-"}, "got no token: give it on stdin"},
		{[]string{"cashu", "receive", garbage}, "not a Cashu token"},
		{[]string{"cashu", "receive", "--token-file", "/nonexistent/token", "x"}, "not both"},
	} {
		code, out, errOut := c.run(tc.args...)
		if code != exitLocal || out != "" || !strings.Contains(errOut, tc.want) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit %d saying %q", tc.args, code, out, errOut, exitLocal, tc.want)
		}
		if strings.Contains(errOut, garbage[6:]) {
			t.Errorf("%q: the token is echoed: %s", tc.args, errOut)
		}
	}
	code, out, _ := c.run("--json", "cashu", "balance")
	if code != 0 || out != `{"mints":[],"total":0}`+"\n" {
		t.Errorf("balance of an empty wallet: %d %q", code, out)
	}
}
