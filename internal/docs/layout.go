package docs

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
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
	// D is the SVG path from the upstream's right side to the reader's
	// left side: straight runs (H) inside columns, cubic curves (C) in the
	// gaps between them (Layout).
	D string
}

// Sizes of the layout, in SVG user units. A character of the node font
// (monospace, 13px) is about 8 units wide.
const (
	charWidth = 8
	nodePad   = 12
	nodeMinW  = 120
	nodeH     = 46
	laneH     = 8 // the height kept in a column for an arrow passing through it
	colGap    = 72
	rowGap    = 18
	margin    = 16
)

// Layout places the jobs of s by topological level, left to right: a job
// with no upstream (and an upstream outside the project) on level 0, any
// other one column right of its furthest upstream. An arrow that skips
// columns gets a lane in each column it passes: a gap between boxes kept
// for it, ordered with them. Within a column, boxes and lanes are ordered
// by the mean row of what leads into them (fewer crossings), then by name
// and database. The result depends on s alone.
//
// No arrow crosses a box: an arrow runs straight out of its upstream's
// right side to the edge of that column, bends only in the empty space
// between two columns (a cubic curve stays between its end points'
// x), runs straight across each column it passes along its lane, and
// straight into its reader's left side.
func Layout(s *Site) Graph {
	type key struct{ db, name string }
	// item is a box or a lane in a column.
	type item struct {
		node     *Node // nil for a lane
		name, db string
		level    int
		y, h     int // placed
		ups      []*item
	}
	var items []*item
	byKey := map[key]*item{}
	for _, j := range s.Jobs { // run order: upstreams first
		n := &item{node: &Node{ID: j.ID, Name: j.Name, Note: jobNote(j), Status: j.Status}, name: j.Name, db: j.Database}
		for _, u := range j.Upstream {
			k := key{j.Database, u.Name}
			un, ok := byKey[k]
			if !ok && u.ID == "" {
				un = &item{node: &Node{Name: u.Name, Note: "outside the project", Status: "external"}, name: u.Name, db: j.Database}
				byKey[k] = un
				items = append(items, un)
			}
			if un != nil {
				n.level = max(n.level, un.level+1)
			}
		}
		byKey[key{j.Database, j.Name}] = n
		items = append(items, n)
	}

	// Each arrow is the chain of items it passes: its upstream, a lane per
	// column skipped, its reader.
	type arrow struct {
		from, to string
		path     []*item
	}
	var arrows []arrow
	for _, j := range s.Jobs {
		to := byKey[key{j.Database, j.Name}]
		for _, u := range j.Upstream {
			from := byKey[key{j.Database, u.Name}]
			if from == nil {
				continue
			}
			path := []*item{from}
			for l := from.level + 1; l < to.level; l++ {
				lane := &item{level: l, name: u.Name + "\x00" + j.Name, db: j.Database, ups: []*item{path[len(path)-1]}}
				items = append(items, lane)
				path = append(path, lane)
			}
			to.ups = append(to.ups, path[len(path)-1])
			arrows = append(arrows, arrow{from: u.Name, to: j.Name, path: append(path, to)})
		}
	}

	// Columns, each ordered by the mean row of what leads into its items.
	levels := 0
	for _, it := range items {
		levels = max(levels, it.level+1)
	}
	cols := make([][]*item, levels)
	row := map[*item]int{}
	for l := range cols {
		for _, it := range items {
			if it.level == l {
				cols[l] = append(cols[l], it)
			}
		}
		bary := map[*item]int{}
		for _, it := range cols[l] {
			if len(it.ups) == 0 {
				continue
			}
			sum := 0
			for _, u := range it.ups {
				sum += row[u]
			}
			bary[it] = sum * 1000 / len(it.ups)
		}
		slices.SortStableFunc(cols[l], func(a, b *item) int {
			return cmp.Or(cmp.Compare(bary[a], bary[b]), cmp.Compare(a.name, b.name), cmp.Compare(a.db, b.db))
		})
		for i, it := range cols[l] {
			row[it] = i
		}
	}

	// Sizes and places.
	heights := make([]int, levels)
	tallest := 0
	for l, c := range cols {
		for i, it := range c {
			it.h = nodeH
			if it.node == nil {
				it.h = laneH
			}
			if i > 0 {
				heights[l] += rowGap
			}
			heights[l] += it.h
		}
		tallest = max(tallest, heights[l])
	}
	colX := make([]int, levels)
	colW := make([]int, levels)
	x := margin
	for l, c := range cols {
		for _, it := range c {
			if n := it.node; n != nil {
				n.W = max(nodeMinW, max(utf8.RuneCountInString(n.Name), utf8.RuneCountInString(n.Note))*charWidth+2*nodePad)
				colW[l] = max(colW[l], n.W)
			}
		}
		colW[l] = max(colW[l], nodeMinW)
		colX[l] = x
		y := margin + (tallest-heights[l])/2
		for _, it := range c {
			it.y = y
			if n := it.node; n != nil {
				n.Level = l
				n.X, n.Y, n.H = x+(colW[l]-n.W)/2, y, nodeH
				n.TextX, n.NameY, n.NoteY = n.X+nodePad, n.Y+19, n.Y+36
			}
			y += it.h + rowGap
		}
		x += colW[l] + colGap
	}
	var g Graph
	g.Width = max(x-colGap+margin, 2*margin)
	g.Height = tallest + 2*margin
	for _, c := range cols {
		for _, it := range c {
			if it.node != nil {
				g.Nodes = append(g.Nodes, *it.node)
			}
		}
	}
	for _, a := range arrows {
		from, to := a.path[0], a.path[len(a.path)-1]
		mid := func(it *item) int { return it.y + it.h/2 }
		var d strings.Builder
		fmt.Fprintf(&d, "M%d %d", from.node.X+from.node.W, mid(from))
		xa, ya := colX[from.level]+colW[from.level], mid(from)
		if xa > from.node.X+from.node.W {
			fmt.Fprintf(&d, "H%d", xa)
		}
		for _, it := range a.path[1:] {
			xb, yb := colX[it.level], mid(it)
			if it == to {
				xb = min(xb, to.node.X-2) // the arrowhead ends at the box
			}
			dx := (xb - xa) / 2
			fmt.Fprintf(&d, "C%d %d %d %d %d %d", xa+dx, ya, xb-dx, yb, xb, yb)
			xa, ya = xb, yb
			if it != to {
				xa = colX[it.level] + colW[it.level] // along the lane
				fmt.Fprintf(&d, "H%d", xa)
			}
		}
		if end := to.node.X - 2; xa < end {
			fmt.Fprintf(&d, "H%d", end)
		}
		g.Edges = append(g.Edges, Edge{From: a.from, To: a.to, D: d.String()})
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
