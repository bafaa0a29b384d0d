package reputation

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// The constants of the formula, all of them; docs/reputation.md explains
// each. Change one here and there together.
const (
	// WeightFollow is the weight of a key the root follows (and of the
	// root itself); WeightFollowOfFollow of a key one of those follows;
	// every other key weighs 0, so that keys nobody the user follows
	// vouches for, however many, move nothing.
	WeightFollow         = 1.0
	WeightFollowOfFollow = 0.25

	// StaleReviewFactor scales a review written before the server's
	// current tools announcement: it was about what the server served
	// then.
	StaleReviewFactor = 0.5

	// ReviewPrior is the rating (on 0..1) a server has before any review,
	// held with the weight of ReviewPriorWeight follows' reviews: one
	// friend's 5 stars move a server far, a quarter-weight stranger's
	// less.
	ReviewPrior       = 0.5
	ReviewPriorWeight = 1.0

	// HistoryPrior is the success rate assumed before any call, held with
	// the weight of HistoryPriorCalls calls.
	HistoryPrior      = 0.5
	HistoryPriorCalls = 2

	// LatencyScale is the median latency that scores one half: 180 ms
	// scores 0.85, 1 s 0.5, 4 s 0.2. Unknown latency scores one half.
	LatencyScale = time.Second

	// AgeFull is the age of the tools announcement that scores fully; a
	// younger one scores in proportion. The age is the server's claim
	// (created_at): it weighs least.
	AgeFull = 90 * 24 * time.Hour

	// The shares of the four parts in the score (they sum to 1).
	ShareReviews = 0.45
	ShareSuccess = 0.35
	ShareLatency = 0.10
	ShareAge     = 0.10

	// AdmitThreshold is the score at or above which `--trust-policy
	// reputation` calls a server not on the trust list. A server nobody
	// in the web of trust reviewed and the user never called scores at
	// most 55 (everything unknown is one half, the age full), so it takes
	// evidence: two follows' 5-star reviews and nothing else score 60.
	AdmitThreshold = 60.0

	// BandWidth is the width of the bands `cvm call --schema` compares
	// before price: scores within one band count as equal, so that price
	// decides between servers of about the same standing.
	BandWidth = 10.0
)

// Review is one author's review of a server as the score counts it: the
// newest top-level review of each author (the server's own left out).
type Review struct {
	// Weight is the author's weight in the web of trust.
	Weight float64
	// Rating is 1..5, or 0 for a review without one.
	Rating int
	// Stale says the review was written before the current tools
	// announcement.
	Stale bool
}

// Evidence is what a server's score is computed from.
type Evidence struct {
	Reviews []Review
	// Outsiders counts reviews by keys outside the web of trust (weight
	// 0): shown, not counted.
	Outsiders int
	// Calls and Succeeded count the user's last calls to the server; P50
	// is the median latency of those that succeeded.
	Calls, Succeeded int
	P50              time.Duration
	// ToolsAnnouncedAt is when the current tools announcement was signed
	// (zero: unknown); Now is when the score is computed.
	ToolsAnnouncedAt, Now time.Time
}

// Score is a server's reputation: a number from 0 to 100 and its parts,
// and why, for a person to read.
type Score struct {
	Value float64 `json:"score"`
	Why   string  `json:"why"`
	// The parts, each on 0..1, before their shares.
	Reviews float64 `json:"reviews"`
	Success float64 `json:"success"`
	Latency float64 `json:"latency"`
	Age     float64 `json:"age"`
}

// Band is the score's band (see BandWidth).
func (s Score) Band() int { return int(s.Value / BandWidth) }

// Admitted reports whether the score reaches AdmitThreshold.
func (s Score) Admitted() bool { return s.Value >= AdmitThreshold }

// Compute scores a server from its evidence:
//
//	reviews = (ReviewPrior·ReviewPriorWeight + Σ w·(rating−1)/4) / (ReviewPriorWeight + Σ w)
//	          over rated reviews, w = author weight × (StaleReviewFactor if stale)
//	success = (succeeded + HistoryPrior·HistoryPriorCalls) / (calls + HistoryPriorCalls)
//	latency = LatencyScale / (LatencyScale + p50), or 1/2 unknown
//	age     = min(age of the tools announcement / AgeFull, 1)
//	score   = 100 · (ShareReviews·reviews + ShareSuccess·success + ShareLatency·latency + ShareAge·age)
func Compute(e Evidence) Score {
	var s Score
	num, den := ReviewPrior*ReviewPriorWeight, ReviewPriorWeight
	for _, r := range e.Reviews {
		if r.Rating < 1 || r.Rating > 5 || r.Weight <= 0 {
			continue
		}
		w := r.Weight
		if r.Stale {
			w *= StaleReviewFactor
		}
		num += w * float64(r.Rating-1) / 4
		den += w
	}
	s.Reviews = num / den
	s.Success = (float64(e.Succeeded) + HistoryPrior*HistoryPriorCalls) / float64(e.Calls+HistoryPriorCalls)
	s.Latency = 0.5
	if e.Succeeded > 0 {
		s.Latency = float64(LatencyScale) / float64(LatencyScale+max(e.P50, 0))
	}
	if !e.ToolsAnnouncedAt.IsZero() {
		s.Age = math.Min(max(e.Now.Sub(e.ToolsAnnouncedAt), 0).Hours()/AgeFull.Hours(), 1)
	}
	s.Value = 100 * (ShareReviews*s.Reviews + ShareSuccess*s.Success + ShareLatency*s.Latency + ShareAge*s.Age)
	s.Value = math.Round(s.Value*10) / 10
	s.Why = explain(e)
	return s
}

// explain says what a score rests on, in the words of the issue: "3
// reviews from people you follow, 96% of your 50 calls succeeded, p50
// 180 ms".
func explain(e Evidence) string {
	var parts []string
	parts = append(parts, explainReviews(e))
	switch {
	case e.Calls == 0:
		parts = append(parts, "you have not called it")
	case e.Succeeded == 0:
		parts = append(parts, plural(e.Calls, "your one call failed", "none of your %d calls succeeded"))
	default:
		parts = append(parts, fmt.Sprintf("%d%% of your %s succeeded, p50 %s", 100*e.Succeeded/e.Calls, plural(e.Calls, "1 call", "%d calls"), millis(e.P50)))
	}
	if !e.ToolsAnnouncedAt.IsZero() {
		days := int(max(e.Now.Sub(e.ToolsAnnouncedAt), 0).Hours() / 24)
		switch days {
		case 0:
			parts = append(parts, "tools announced today")
		default:
			parts = append(parts, fmt.Sprintf("tools announced %s ago", plural(days, "1 day", "%d days")))
		}
	}
	return strings.Join(parts, ", ")
}

func explainReviews(e Evidence) string {
	var follows, fof, rated, stale int
	var sum float64
	for _, r := range e.Reviews {
		switch {
		case r.Weight >= WeightFollow:
			follows++
		case r.Weight > 0:
			fof++
		default:
			continue
		}
		if r.Stale {
			stale++
		}
		if r.Rating >= 1 && r.Rating <= 5 {
			rated++
			sum += float64(r.Rating)
		}
	}
	var out []string
	if follows > 0 {
		out = append(out, plural(follows, "1 review", "%d reviews")+" from people you follow")
	}
	if fof > 0 {
		out = append(out, plural(fof, "1 review", "%d reviews")+" from people they follow")
	}
	if len(out) == 0 {
		out = append(out, "no reviews from your web of trust")
	}
	s := strings.Join(out, " and ")
	if rated > 0 {
		s += fmt.Sprintf(" (%s, average %.1f/5)", plural(rated, "1 rated", "%d rated"), sum/float64(rated))
	}
	if stale > 0 {
		s += fmt.Sprintf(" (%d about an earlier version)", stale)
	}
	if e.Outsiders > 0 {
		s += fmt.Sprintf("; %s from outside it ignored", plural(e.Outsiders, "1 review", "%d reviews"))
	}
	return s
}

// plural picks one for n == 1 and formats many with n otherwise.
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	if strings.Contains(many, "%d") {
		return fmt.Sprintf(many, n)
	}
	return many
}

func millis(d time.Duration) string {
	if d < time.Second {
		return fmt.Sprintf("%d ms", d.Milliseconds())
	}
	return fmt.Sprintf("%.1f s", d.Seconds())
}
