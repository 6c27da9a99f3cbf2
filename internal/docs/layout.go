package docs

import (
	"cmp"
	"fmt"
	"slices"
	"unicode/utf8"
)

// Graph is the lineage graph laid out: a box per job (and per upstream
// outside the project), an arrow from each upstream to the job that reads
// it, in SVG user units.
type Graph struct {
	Width, Height int
	Nodes         []Node
	Edges         []Edge
}

// Node is one box of the graph.
type Node struct {
	// ID is the job's anchor; "" for an upstream outside the project.
	ID, Name, Note, Status string
	Level                  int
	X, Y, W, H             int
	// TextX, NameY and NoteY place the box's two lines of text.
	TextX, NameY, NoteY int
}

// Edge is one arrow: from an upstream to the job that reads it.
type Edge struct {
	From, To string
	// D is the SVG path: a cubic curve from the upstream's right side to
	// the reader's left side.
	D string
}

// Sizes of the layout, in SVG user units. A character of the node font
// (monospace, 13px) is about 8 units wide.
const (
	charWidth = 8
	nodePad   = 12
	nodeMinW  = 120
	nodeH     = 46
	colGap    = 72
	rowGap    = 18
	margin    = 16
)

// Layout places the jobs of s by topological level, left to right: a job
// with no upstream (and an upstream outside the project) on level 0, any
// other one column right of its furthest upstream. Within a column, boxes
// are ordered by the mean row of their upstreams (fewer crossings), then
// by name and database. The result depends on s alone.
func Layout(s *Site) Graph {
	type key struct{ db, name string }
	var nodes []*Node
	byKey := map[key]*Node{}
	dbOf := map[*Node]string{}
	for _, j := range s.Jobs { // run order: upstreams first
		n := &Node{ID: j.ID, Name: j.Name, Note: jobNote(j), Status: j.Status}
		for _, u := range j.Upstream {
			k := key{j.Database, u.Name}
			un, ok := byKey[k]
			if !ok && u.ID == "" {
				un = &Node{Name: u.Name, Note: "outside the project", Status: "external"}
				byKey[k], dbOf[un] = un, j.Database
				nodes = append(nodes, un)
			}
			if un != nil {
				n.Level = max(n.Level, un.Level+1)
			}
		}
		byKey[key{j.Database, j.Name}], dbOf[n] = n, j.Database
		nodes = append(nodes, n)
	}

	// Columns, each ordered by the mean row of its nodes' upstreams.
	levels := 0
	for _, n := range nodes {
		levels = max(levels, n.Level+1)
	}
	cols := make([][]*Node, levels)
	row := map[*Node]int{}
	ups := map[*Node][]*Node{}
	for _, j := range s.Jobs {
		n := byKey[key{j.Database, j.Name}]
		for _, u := range j.Upstream {
			if un := byKey[key{j.Database, u.Name}]; un != nil {
				ups[n] = append(ups[n], un)
			}
		}
	}
	for l := range cols {
		for _, n := range nodes {
			if n.Level == l {
				cols[l] = append(cols[l], n)
			}
		}
		bary := map[*Node]int{}
		for _, n := range cols[l] {
			if len(ups[n]) == 0 {
				continue
			}
			sum := 0
			for _, u := range ups[n] {
				sum += row[u]
			}
			bary[n] = sum * 1000 / len(ups[n])
		}
		slices.SortStableFunc(cols[l], func(a, b *Node) int {
			return cmp.Or(cmp.Compare(bary[a], bary[b]), cmp.Compare(a.Name, b.Name), cmp.Compare(dbOf[a], dbOf[b]))
		})
		for i, n := range cols[l] {
			row[n] = i
		}
	}

	// Sizes and places.
	var g Graph
	tallest := 0
	for _, c := range cols {
		tallest = max(tallest, len(c)*nodeH+(len(c)-1)*rowGap)
	}
	x := margin
	for _, c := range cols {
		colW := 0
		for _, n := range c {
			n.W = max(nodeMinW, max(utf8.RuneCountInString(n.Name), utf8.RuneCountInString(n.Note))*charWidth+2*nodePad)
			colW = max(colW, n.W)
		}
		top := margin + (tallest-(len(c)*nodeH+(len(c)-1)*rowGap))/2
		for i, n := range c {
			n.X, n.Y, n.H = x+(colW-n.W)/2, top+i*(nodeH+rowGap), nodeH
			n.TextX, n.NameY, n.NoteY = n.X+nodePad, n.Y+19, n.Y+36
		}
		x += colW + colGap
	}
	g.Width = max(x-colGap+margin, 2*margin)
	g.Height = tallest + 2*margin
	for _, c := range cols {
		for _, n := range c {
			g.Nodes = append(g.Nodes, *n)
		}
	}
	for _, j := range s.Jobs {
		to := byKey[key{j.Database, j.Name}]
		for _, u := range j.Upstream {
			from := byKey[key{j.Database, u.Name}]
			if from == nil {
				continue
			}
			x1, y1 := from.X+from.W, from.Y+from.H/2
			x2, y2 := to.X-2, to.Y+to.H/2 // the arrowhead ends at the box
			dx := (x2 - x1) / 2
			g.Edges = append(g.Edges, Edge{From: from.Name, To: to.Name,
				D: fmt.Sprintf("M%d %dC%d %d %d %d %d %d", x1, y1, x1+dx, y1, x2-dx, y2, x2, y2)})
		}
	}
	return g
}

// jobNote is the second line of a job's box.
func jobNote(j *Job) string {
	switch j.Status {
	case StatusNotRun:
		return "not run yet"
	case StatusFailed:
		return "last run failed"
	case StatusWarn:
		return fmt.Sprintf("snapshot %d · audit warning", j.Snapshot)
	}
	if j.Snapshot == 0 {
		return "no snapshot"
	}
	return fmt.Sprintf("snapshot %d", j.Snapshot)
}
