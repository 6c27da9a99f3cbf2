package docs

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// point is a point of the drawing.
type point struct{ x, y float64 }

var (
	pathCmd = regexp.MustCompile(`([MHC])([-0-9 ]+)`)
	pathNum = regexp.MustCompile(`-?\d+`)
)

// pathPoints samples an edge's SVG path (M, H and C commands, as Layout
// writes them) every few units along each segment.
func pathPoints(t *testing.T, d string) []point {
	t.Helper()
	var pts []point
	var cur point
	for _, m := range pathCmd.FindAllStringSubmatch(d, -1) {
		var n []float64
		for _, f := range pathNum.FindAllString(m[2], -1) {
			v, err := strconv.ParseFloat(f, 64)
			require.NoError(t, err)
			n = append(n, v)
		}
		switch m[1] {
		case "M":
			require.Len(t, n, 2, d)
			cur = point{n[0], n[1]}
			pts = append(pts, cur)
		case "H":
			require.Len(t, n, 1, d)
			for i := 1; i <= 20; i++ {
				pts = append(pts, point{cur.x + (n[0]-cur.x)*float64(i)/20, cur.y})
			}
			cur = point{n[0], cur.y}
		case "C":
			require.Len(t, n, 6, d)
			p1, p2, p3 := point{n[0], n[1]}, point{n[2], n[3]}, point{n[4], n[5]}
			for i := 1; i <= 50; i++ {
				s := float64(i) / 50
				a, b, c, e := (1-s)*(1-s)*(1-s), 3*(1-s)*(1-s)*s, 3*(1-s)*s*s, s*s*s
				pts = append(pts, point{a*cur.x + b*p1.x + c*p2.x + e*p3.x, a*cur.y + b*p1.y + c*p2.y + e*p3.y})
			}
			cur = p3
		}
	}
	return pts
}

// randomSite is a project of n jobs in one database, each reading up to
// three earlier jobs (or, now and then, a table outside the project).
func randomSite(rng *rand.Rand, n int) *Site {
	s := &Site{Title: "p"}
	for i := range n {
		name := fmt.Sprintf("job%02d", i)
		if rng.IntN(4) == 0 {
			name += "_with_a_longer_name"
		}
		j := &Job{ID: "job-" + name, Name: name, Database: "p.duckdb", Status: StatusOK, Snapshot: 1}
		seen := map[string]bool{}
		for range rng.IntN(4) {
			if i == 0 || rng.IntN(8) == 0 {
				if !seen["outside"] {
					seen["outside"] = true
					j.Upstream = append(j.Upstream, Ref{Name: "outside"})
				}
				continue
			}
			u := s.Jobs[rng.IntN(i)]
			if !seen[u.Name] {
				seen[u.Name] = true
				j.Upstream = append(j.Upstream, Ref{Name: u.Name, ID: u.ID})
			}
		}
		s.Jobs = append(s.Jobs, j)
	}
	return s
}

// TestLayoutArrowsCrossNoBox: in random projects (arrows that skip
// columns among them), no point of any arrow lies inside any box; each
// arrow starts on its upstream's right side and ends just left of its
// reader's left side, at their middles.
func TestLayoutArrowsCrossNoBox(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(45, 46))
	skipping := 0
	for trial := range 60 {
		s := randomSite(rng, 2+rng.IntN(12))
		g := Layout(s)
		boxes := map[string]Node{}
		for _, n := range g.Nodes {
			boxes[n.Name] = n
		}
		for _, e := range g.Edges {
			from, to := boxes[e.From], boxes[e.To]
			if to.Level-from.Level > 1 {
				skipping++
			}
			pts := pathPoints(t, e.D)
			require.Equal(t, point{float64(from.X + from.W), float64(from.Y + from.H/2)}, pts[0], "trial %d: %s → %s starts on its upstream's right side: %s", trial, e.From, e.To, e.D)
			require.Equal(t, point{float64(to.X - 2), float64(to.Y + to.H/2)}, pts[len(pts)-1], "trial %d: %s → %s ends at its reader's left side: %s", trial, e.From, e.To, e.D)
			for _, p := range pts {
				if p.x < 0 || p.y < 0 || p.x > float64(g.Width) || p.y > float64(g.Height) {
					t.Fatalf("trial %d: %s → %s leaves the drawing at (%.1f, %.1f)", trial, e.From, e.To, p.x, p.y)
				}
				for _, b := range g.Nodes {
					if p.x > float64(b.X)+0.5 && p.x < float64(b.X+b.W)-0.5 && p.y > float64(b.Y)+0.5 && p.y < float64(b.Y+b.H)-0.5 {
						t.Fatalf("trial %d: the arrow %s → %s crosses the box of %s at (%.1f, %.1f): %s", trial, e.From, e.To, b.Name, p.x, p.y, e.D)
					}
				}
			}
		}
	}
	require.Greater(t, skipping, 30, "arrows that skip columns were drawn")
}
