// Package webui serves cvm's browser pages from assets embedded in the
// binary: the security headers every page gets (a strict
// Content-Security-Policy among them), the Host-header check that keeps a
// DNS-rebinding site from reaching a loopback server, and the script and
// style shared by the pages (safe DOM building, the markdown subset, the
// schema form, and the disclosure that opens a tool's form right under the
// tool chosen, however long the list).
//
// The pages load nothing from anywhere else: no fonts, scripts or styles
// from other origins, so the CSP can forbid them all.
//
// Files: webui.go holds the Go side (SetHeaders and the CSP, HostAllowed
// and CheckHost, Pages, WriteError) and embeds assets/, the shared script
// and style each page's own assets sit beside.
package webui
