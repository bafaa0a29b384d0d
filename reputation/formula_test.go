package reputation_test

import (
	"testing"
	"time"

	"github.com/cvmgo/cvm/reputation"
)

func TestCompute(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	old := now.Add(-reputation.AgeFull)
	follow5 := reputation.Review{Weight: reputation.WeightFollow, Rating: 5}
	for _, c := range []struct {
		name  string
		e     reputation.Evidence
		score float64
		admit bool
		why   string
	}{
		{"unknown, announced long ago", reputation.Evidence{ToolsAnnouncedAt: old, Now: now}, 55, false,
			"no reviews from your web of trust, you have not called it, tools announced 90 days ago"},
		{"two follows' five stars, nothing else", reputation.Evidence{Reviews: []reputation.Review{follow5, follow5}, ToolsAnnouncedAt: now, Now: now}, 60, true,
			"2 reviews from people you follow (2 rated, average 5.0/5), you have not called it, tools announced today"},
		{"a thousand strangers' five stars", reputation.Evidence{Outsiders: 1000, Now: now}, 45, false,
			"no reviews from your web of trust; 1000 reviews from outside it ignored, you have not called it"},
		{"the issue's example", reputation.Evidence{
			Reviews: []reputation.Review{{Weight: 1}, {Weight: 1}, {Weight: 1}},
			Calls:   50, Succeeded: 48, P50: 180 * time.Millisecond, ToolsAnnouncedAt: now.Add(-40 * 24 * time.Hour), Now: now}, 68.4, true,
			"3 reviews from people you follow, 96% of your 50 calls succeeded, p50 180 ms, tools announced 40 days ago"},
		{"every call failed", reputation.Evidence{Calls: 10, Now: now}, 30.4, false,
			"no reviews from your web of trust, none of your 10 calls succeeded"},
		{"a follow of a follow's one star, stale", reputation.Evidence{Reviews: []reputation.Review{{Weight: reputation.WeightFollowOfFollow, Rating: 1, Stale: true}}, Now: now}, 42.5, false,
			"1 review from people they follow (1 rated, average 1.0/5) (1 about an earlier version), you have not called it"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := reputation.Compute(c.e)
			if s.Value != c.score || s.Admitted() != c.admit || s.Why != c.why {
				t.Errorf("got %v admitted=%v %q\nwant %v admitted=%v %q", s.Value, s.Admitted(), s.Why, c.score, c.admit, c.why)
			}
		})
	}
}
