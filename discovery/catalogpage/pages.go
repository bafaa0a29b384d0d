package catalogpage

import (
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/cvmgo/cvm/internal/webui"
)

// The catalog of one common schema (/schema/HASH) and of one category
// (/category/NAME): the page itself, which reads its fixed filter from
// its path, so that a link to them keeps working as the catalog changes.

// maxCategoryLen bounds a category in a path; announced ones are words.
const maxCategoryLen = 100

func (p *Page) serveSchemaPage(w http.ResponseWriter, r *http.Request) {
	h := r.PathValue("hash")
	if h == "" || len(h) > 64 || strings.Trim(strings.ToLower(h), "0123456789abcdef") != "" {
		webui.WriteError(w, http.StatusNotFound, CodeBadFilter, "a schema page is /schema/ and the schema's hash (hex, or its start)")
		return
	}
	p.serveIndex(w, r)
}

func (p *Page) serveCategoryPage(w http.ResponseWriter, r *http.Request) {
	c := r.PathValue("name")
	if c == "" || len(c) > maxCategoryLen || !utf8.ValidString(c) {
		webui.WriteError(w, http.StatusNotFound, CodeBadFilter, "a category page is /category/ and the category's name")
		return
	}
	p.serveIndex(w, r)
}
