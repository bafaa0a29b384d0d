package browsertest

import (
	"strings"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// accessibilityJS lists what a person relying on a screen reader or on
// contrast would trip over in the visible page: form controls without a
// label, and text whose contrast with its background is under 4.5:1.
const accessibilityJS = `(() => {
  const problems = [];
  const visible = e => { const r = e.getBoundingClientRect(); const s = getComputedStyle(e);
    return r.width > 0 && r.height > 0 && s.visibility !== "hidden" && s.display !== "none"; };
  for (const e of document.querySelectorAll("input, select, textarea")) {
    if (!visible(e)) continue;
    const named = (e.labels && e.labels.length) || e.getAttribute("aria-label") || e.getAttribute("aria-labelledby");
    if (!named) problems.push("unlabelled " + e.tagName.toLowerCase() + (e.id ? "#" + e.id : ""));
  }
  const rgb = s => { const m = s.match(/[\d.]+/g); return m ? m.map(Number) : [0, 0, 0, 0]; };
  const lum = c => { const f = v => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
    return 0.2126 * f(c[0]) + 0.7152 * f(c[1]) + 0.0722 * f(c[2]); };
  const bg = e => { for (let n = e; n; n = n.parentElement) { const c = rgb(getComputedStyle(n).backgroundColor);
      if (c.length < 4 || c[3] > 0) return c; } return [255, 255, 255]; };
  for (const e of document.querySelectorAll("body *")) {
    if (!visible(e)) continue;
    const own = [...e.childNodes].some(n => n.nodeType === 3 && n.textContent.trim());
    if (!own) continue;
    const fg = lum(rgb(getComputedStyle(e).color)), b = lum(bg(e));
    const ratio = (Math.max(fg, b) + 0.05) / (Math.min(fg, b) + 0.05);
    if (ratio < 4.5) problems.push("contrast " + ratio.toFixed(2) + " for " + e.tagName.toLowerCase() + ": " + e.textContent.trim().slice(0, 40));
  }
  if (document.documentElement.scrollWidth > window.innerWidth + 1)
    problems.push("horizontal scrolling: page is " + document.documentElement.scrollWidth + " px wide in a " + window.innerWidth + " px viewport");
  return problems;
})()`

// CheckAccessible fails the test if the visible page has unlabelled
// controls, text under 4.5:1 contrast, or is wider than the viewport.
func (p *Person) CheckAccessible(what string) {
	p.t.Helper()
	if problems := Eval[[]string](p, accessibilityJS); len(problems) > 0 {
		p.Shot("inaccessible-" + what)
		p.t.Errorf("%s: %s: %s", p.Name, what, strings.Join(problems, "; "))
	}
}

// TabReaches presses Tab from the top of the page until focus has been on
// every element of ids (CSS selectors), failing if some are never reached.
func (p *Person) TabReaches(what string, sels ...string) {
	p.t.Helper()
	Eval[bool](p, `(document.activeElement && document.activeElement.blur(), window.scrollTo(0, 0), true)`)
	want := map[string]bool{}
	for _, s := range sels {
		want[s] = true
	}
	total := Eval[int](p, `document.querySelectorAll("a[href], button, input, select, textarea, [tabindex]").length`)
	for i := 0; i < total+5 && len(want) > 0; i++ {
		p.Do("tab", chromedp.KeyEvent(kb.Tab))
		for s := range want {
			if Eval[bool](p, `document.activeElement === document.querySelector(`+jsString(s)+`)`) {
				delete(want, s)
			}
		}
	}
	if len(want) > 0 {
		var missed []string
		for s := range want {
			missed = append(missed, s)
		}
		p.t.Errorf("%s: %s: Tab never reached %s", p.Name, what, strings.Join(missed, ", "))
	}
}

func jsString(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	return `"` + r.Replace(s) + `"`
}

// inPlaceJS measures, for an opener button and the panel it opened: the
// gap from the button's bottom to the panel's top, whether the panel holds
// the focus and the focused element is in the viewport, the button's
// aria-expanded, and how far down the page the button is.
const inPlaceJS = `((opener, panel) => {
  const b = document.querySelector(opener), f = document.querySelector(panel);
  if (!b || !f) return {missing: (b ? "" : opener + " ") + (f ? "" : panel)};
  const a = document.activeElement, ar = a.getBoundingClientRect(), br = b.getBoundingClientRect();
  return {gap: Math.round(f.getBoundingClientRect().top - br.bottom), focused: f.contains(a),
    focusInView: ar.top >= 0 && ar.bottom <= innerHeight, expanded: b.getAttribute("aria-expanded") || "",
    openerTop: Math.round(br.top + scrollY), viewport: innerHeight};
})`

// OpenedInPlace fails the test unless the panel (a CSS selector) that the
// button opener opened starts under it, at most maxGap pixels below,
// holds the focus with the focused element in the viewport, and opener
// says aria-expanded="true". It returns how far down the page, in
// pixels, the opener is, and the viewport's height, for a test to check
// that the list was long enough to tell.
func (p *Person) OpenedInPlace(what, opener, panel string, maxGap int) (openerTop, viewport int) {
	p.t.Helper()
	got := Eval[struct {
		Missing             string
		Gap                 int
		Focused             bool
		FocusInView         bool
		Expanded            string
		OpenerTop, Viewport int
	}](p, inPlaceJS+`(`+jsString(opener)+`, `+jsString(panel)+`)`)
	switch {
	case got.Missing != "":
		p.t.Errorf("%s: %s: not on the page: %s", p.Name, what, got.Missing)
	case got.Gap < 0 || got.Gap > maxGap || !got.Focused || !got.FocusInView || got.Expanded != "true":
		p.Shot("not-in-place-" + what)
		p.t.Errorf("%s: %s: the panel starts %d px under its button (at most %d), holds the focus %t, focus in view %t, aria-expanded %q",
			p.Name, what, got.Gap, maxGap, got.Focused, got.FocusInView, got.Expanded)
	}
	return got.OpenerTop, got.Viewport
}
