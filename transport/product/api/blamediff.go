package api

import "bytes"

// matchLines is the line diff blame passes blame through: for each line
// of the newer version b, the line of the older version a it is
// unchanged from, or -1 where b changed it. A blame agrees with git's
// only if every step pairs the same lines git's does, and where several
// pairings are equally short (moved blocks, repeated blank lines and
// braces) that is a matter of xdiff's exact procedure. So this follows
// it step by step, as git blame runs it (no context lines, the default
// Myers algorithm, the indent heuristic on):
//
//  1. whole 1 KiB blocks of common tail are cut off (xdi_diff's
//     trim_common_tail), back to a line end; those lines are unchanged;
//  2. lines are split keeping their "\n", and equal lines share a class;
//  3. the common head and tail lines are set aside (xdl_trim_ends);
//  4. lines with no equal on the other side, and lines with many equals
//     amid such lines, take no part in the search (xdl_cleanup_records);
//  5. the rest is divided at middle snakes of the Myers search, with
//     xdiff's cost cut-offs for large inputs (xdl_recs_cmp, xdl_split);
//  6. each group of changed lines is slid as xdl_change_compact does:
//     down as far as it goes, back up to meet a change on the other side,
//     else to where the indent heuristic scores it best.
func matchLines(a, b []byte) []int {
	a, b, tail := trimCommonTail(a, b)
	la, lb := splitLines(a), splitLines(b)
	d := newXDiff(la, lb)
	d.run()
	d.compact(&d.f[0], &d.f[1])
	d.compact(&d.f[1], &d.f[0])
	match := make([]int, 0, len(lb)+tail)
	i := 0
	for j := range lb {
		for i < len(la) && d.f[0].changed(i) {
			i++
		}
		if d.f[1].changed(j) {
			match = append(match, -1)
			continue
		}
		match = append(match, i)
		i++
	}
	for k := range tail {
		match = append(match, len(la)+k)
	}
	return match
}

// trimCommonTail cuts the whole 1024-byte blocks a and b end with, then
// gives back up to the first line end in what was cut, so both end on a
// line boundary; tail is the number of lines cut.
func trimCommonTail(a, b []byte) ([]byte, []byte, int) {
	const blk = 1024
	trimmed := 0
	smaller := min(len(a), len(b))
	for blk+trimmed <= smaller && bytes.Equal(a[len(a)-trimmed-blk:len(a)-trimmed], b[len(b)-trimmed-blk:len(b)-trimmed]) {
		trimmed += blk
	}
	cut := a[len(a)-trimmed:]
	recovered := 0
	for recovered < trimmed {
		recovered++
		if cut[recovered-1] == '\n' {
			break
		}
	}
	keep := trimmed - recovered
	return a[:len(a)-keep], b[:len(b)-keep], len(splitLines(a[len(a)-keep:]))
}

// splitLines splits text into lines, each with its "\n" (the last one
// may lack it).
func splitLines(text []byte) [][]byte {
	out := make([][]byte, 0, bytes.Count(text, []byte{'\n'})+1)
	for len(text) > 0 {
		i := bytes.IndexByte(text, '\n') + 1
		if i == 0 {
			i = len(text)
		}
		out = append(out, text[:i])
		text = text[i:]
	}
	return out
}

// xfile is one side of a line diff: its lines' classes, the lines that
// take part in the search (ref, by index into the file) and which lines
// changed (chg, offset by one so that index -1 and n read false).
type xfile struct {
	lines [][]byte
	class []int
	ref   []int // indices of the lines the search sees
	refHa []int // their classes
	chg   []bool
}

func (f *xfile) changed(i int) bool { return f.chg[i+1] }
func (f *xfile) set(i int, v bool)  { f.chg[i+1] = v }

// xdiff is one line diff in progress.
type xdiff struct {
	f          [2]xfile
	kvdf, kvdb []int
	off        int // index of diagonal 0 in kvdf and kvdb
	mxcost     int
}

// Constants of xdiff's search and cleanup.
const (
	xdlMaxEqLimit  = 1024 // XDL_MAX_EQLIMIT
	xdlSimscanWin  = 100  // XDL_SIMSCAN_WINDOW
	xdlKpdisRun    = 4    // XDL_KPDIS_RUN
	xdlMaxCostMin  = 256  // XDL_MAX_COST_MIN
	xdlHeurMinCost = 256  // XDL_HEUR_MIN_COST
	xdlSnakeCnt    = 20   // XDL_SNAKE_CNT
	xdlKHeur       = 4    // XDL_K_HEUR
)

// bogosqrt is xdiff's rough square root: a power of two.
func bogosqrt(n int) int {
	i := 1
	for ; n > 0; n >>= 2 {
		i <<= 1
	}
	return i
}

func newXDiff(la, lb [][]byte) *xdiff {
	d := &xdiff{}
	classes := map[string]int{}
	var counts [][2]int
	for s, lines := range [2][][]byte{la, lb} {
		f := &d.f[s]
		f.lines, f.class, f.chg = lines, make([]int, len(lines)), make([]bool, len(lines)+2)
		for i, l := range lines {
			c, ok := classes[string(l)]
			if !ok {
				c = len(counts)
				classes[string(l)] = c
				counts = append(counts, [2]int{})
			}
			counts[c][s]++
			f.class[i] = c
		}
	}
	// The common head and tail (xdl_trim_ends).
	fa, fb := &d.f[0], &d.f[1]
	start := 0
	for start < min(len(la), len(lb)) && fa.class[start] == fb.class[start] {
		start++
	}
	end := 0
	for end < min(len(la), len(lb))-start && fa.class[len(la)-1-end] == fb.class[len(lb)-1-end] {
		end++
	}
	// Lines without an equal on the other side are changed outright;
	// lines with many equals are left out when they sit among those
	// (xdl_cleanup_records).
	for s := range 2 {
		f, other := &d.f[s], 1-s
		lim := min(bogosqrt(len(f.lines)), xdlMaxEqLimit)
		hi := len(f.lines) - end
		dis := make([]byte, len(f.lines)+1)
		for i := start; i < hi; i++ {
			switch nm := counts[f.class[i]][other]; {
			case nm == 0:
				dis[i] = 0
			case nm >= lim:
				dis[i] = 2
			default:
				dis[i] = 1
			}
		}
		for i := start; i < hi; i++ {
			if dis[i] == 1 || dis[i] == 2 && !cleanMultimatch(dis, i, start, hi-1) {
				f.ref = append(f.ref, i)
				f.refHa = append(f.refHa, f.class[i])
			} else {
				f.set(i, true)
			}
		}
	}
	n1, n2 := len(fa.ref), len(fb.ref)
	ndiags := n1 + n2 + 3
	d.kvdf, d.kvdb = make([]int, ndiags+1), make([]int, ndiags+1)
	d.off = n2 + 1
	d.mxcost = max(bogosqrt(ndiags), xdlMaxCostMin)
	return d
}

// cleanMultimatch reports whether line i, which has many equals, sits
// in a run mostly of lines without any (xdl_clean_mmatch): such a line
// is left out of the search.
func cleanMultimatch(dis []byte, i, s, e int) bool {
	s, e = max(s, i-xdlSimscanWin), min(e, i+xdlSimscanWin)
	rdis0, rpdis0 := 0, 1
	for r := 1; i-r >= s; r++ {
		if dis[i-r] == 0 {
			rdis0++
		} else if dis[i-r] == 2 {
			rpdis0++
		} else {
			break
		}
	}
	if rdis0 == 0 {
		return false
	}
	rdis1, rpdis1 := 0, 1
	for r := 1; i+r <= e; r++ {
		if dis[i+r] == 0 {
			rdis1++
		} else if dis[i+r] == 2 {
			rpdis1++
		} else {
			break
		}
	}
	if rdis1 == 0 {
		return false
	}
	rdis1 += rdis0
	rpdis1 += rpdis0
	return rpdis1*xdlKpdisRun < rpdis1+rdis1
}

// box is a part of the search still to divide, with whether its halves
// must be minimal.
type box struct {
	off1, lim1, off2, lim2 int
	needMin                bool
}

// run marks the changed lines (xdl_recs_cmp), dividing boxes with a
// stack in the order xdiff's recursion visits them.
func (d *xdiff) run() {
	fa, fb := &d.f[0], &d.f[1]
	ha1, ha2 := fa.refHa, fb.refHa
	stack := []box{{0, len(ha1), 0, len(ha2), false}}
	for len(stack) > 0 {
		bx := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		off1, lim1, off2, lim2 := bx.off1, bx.lim1, bx.off2, bx.lim2
		for off1 < lim1 && off2 < lim2 && ha1[off1] == ha2[off2] {
			off1, off2 = off1+1, off2+1
		}
		for off1 < lim1 && off2 < lim2 && ha1[lim1-1] == ha2[lim2-1] {
			lim1, lim2 = lim1-1, lim2-1
		}
		switch {
		case off1 == lim1:
			for ; off2 < lim2; off2++ {
				fb.set(fb.ref[off2], true)
			}
		case off2 == lim2:
			for ; off1 < lim1; off1++ {
				fa.set(fa.ref[off1], true)
			}
		default:
			i1, i2, minLo, minHi := d.split(off1, lim1, off2, lim2, bx.needMin)
			// The low half is divided first, as the recursion does.
			stack = append(stack, box{i1, lim1, i2, lim2, minHi}, box{off1, i1, off2, i2, minLo})
		}
	}
}

// split finds where to divide a box (xdl_split): the middle snake of
// the forward and backward Myers searches, or, past xdiff's cost
// cut-offs when not minimal, a good snake or the furthest-reaching
// diagonal.
func (d *xdiff) split(off1, lim1, off2, lim2 int, needMin bool) (int, int, bool, bool) {
	ha1, ha2 := d.f[0].refHa, d.f[1].refHa
	kf := func(k int) *int { return &d.kvdf[k+d.off] }
	kb := func(k int) *int { return &d.kvdb[k+d.off] }
	const lineMax = int(^uint(0) >> 1)
	dmin, dmax := off1-lim2, lim1-off2
	fmid, bmid := off1-off2, lim1-lim2
	odd := (fmid-bmid)&1 != 0
	fmin, fmax, bmin, bmax := fmid, fmid, bmid, bmid
	*kf(fmid) = off1
	*kb(bmid) = lim1
	for ec := 1; ; ec++ {
		gotSnake := false
		if fmin > dmin {
			fmin--
			*kf(fmin - 1) = -1
		} else {
			fmin++
		}
		if fmax < dmax {
			fmax++
			*kf(fmax + 1) = -1
		} else {
			fmax--
		}
		for k := fmax; k >= fmin; k -= 2 {
			var i1 int
			if *kf(k - 1) >= *kf(k + 1) {
				i1 = *kf(k - 1) + 1
			} else {
				i1 = *kf(k + 1)
			}
			prev := i1
			i2 := i1 - k
			for i1 < lim1 && i2 < lim2 && ha1[i1] == ha2[i2] {
				i1, i2 = i1+1, i2+1
			}
			if i1-prev > xdlSnakeCnt {
				gotSnake = true
			}
			*kf(k) = i1
			if odd && bmin <= k && k <= bmax && *kb(k) <= i1 {
				return i1, i2, true, true
			}
		}
		if bmin > dmin {
			bmin--
			*kb(bmin - 1) = lineMax
		} else {
			bmin++
		}
		if bmax < dmax {
			bmax++
			*kb(bmax + 1) = lineMax
		} else {
			bmax--
		}
		for k := bmax; k >= bmin; k -= 2 {
			var i1 int
			if *kb(k - 1) < *kb(k + 1) {
				i1 = *kb(k - 1)
			} else {
				i1 = *kb(k + 1) - 1
			}
			prev := i1
			i2 := i1 - k
			for i1 > off1 && i2 > off2 && ha1[i1-1] == ha2[i2-1] {
				i1, i2 = i1-1, i2-1
			}
			if prev-i1 > xdlSnakeCnt {
				gotSnake = true
			}
			*kb(k) = i1
			if !odd && fmin <= k && k <= fmax && i1 <= *kf(k) {
				return i1, i2, true, true
			}
		}
		if needMin {
			continue
		}
		if gotSnake && ec > xdlHeurMinCost {
			best, s1, s2 := 0, 0, 0
			for k := fmax; k >= fmin; k -= 2 {
				dd := abs(k - fmid)
				i1 := *kf(k)
				i2 := i1 - k
				v := (i1 - off1) + (i2 - off2) - dd
				if v > xdlKHeur*ec && v > best && off1+xdlSnakeCnt <= i1 && i1 < lim1 && off2+xdlSnakeCnt <= i2 && i2 < lim2 {
					for j := 1; ha1[i1-j] == ha2[i2-j]; j++ {
						if j == xdlSnakeCnt {
							best, s1, s2 = v, i1, i2
							break
						}
					}
				}
			}
			if best > 0 {
				return s1, s2, true, false
			}
			for k := bmax; k >= bmin; k -= 2 {
				dd := abs(k - bmid)
				i1 := *kb(k)
				i2 := i1 - k
				v := (lim1 - i1) + (lim2 - i2) - dd
				if v > xdlKHeur*ec && v > best && off1 < i1 && i1 <= lim1-xdlSnakeCnt && off2 < i2 && i2 <= lim2-xdlSnakeCnt {
					for j := 0; ha1[i1+j] == ha2[i2+j]; j++ {
						if j == xdlSnakeCnt-1 {
							best, s1, s2 = v, i1, i2
							break
						}
					}
				}
			}
			if best > 0 {
				return s1, s2, false, true
			}
		}
		if ec >= d.mxcost {
			fbest, fbest1 := -1, -1
			for k := fmax; k >= fmin; k -= 2 {
				i1 := min(*kf(k), lim1)
				i2 := i1 - k
				if lim2 < i2 {
					i1, i2 = lim2+k, lim2
				}
				if fbest < i1+i2 {
					fbest, fbest1 = i1+i2, i1
				}
			}
			bbest, bbest1 := lineMax, lineMax
			for k := bmax; k >= bmin; k -= 2 {
				i1 := max(off1, *kb(k))
				i2 := i1 - k
				if i2 < off2 {
					i1, i2 = off2+k, off2
				}
				if i1+i2 < bbest {
					bbest, bbest1 = i1+i2, i1
				}
			}
			if (lim1+lim2)-bbest < fbest-(off1+off2) {
				return fbest1, fbest - fbest1, true, false
			}
			return bbest1, bbest - bbest1, false, true
		}
	}
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// group is a run of changed lines [start, end) of one side; start ==
// end is the empty group before line start.
type group struct{ start, end int }

func (f *xfile) firstGroup() group {
	g := group{}
	for f.changed(g.end) {
		g.end++
	}
	return g
}

// next moves to the following group; false at the end of the file.
func (f *xfile) next(g *group) bool {
	if g.end == len(f.lines) {
		return false
	}
	g.start = g.end + 1
	for g.end = g.start; f.changed(g.end); g.end++ {
	}
	return true
}

// previous moves to the group before; false at the start of the file.
func (f *xfile) previous(g *group) bool {
	if g.start == 0 {
		return false
	}
	g.end = g.start - 1
	for g.start = g.end; f.changed(g.start - 1); g.start-- {
	}
	return true
}

// slideUp shifts g up a line when the line above equals its last,
// merging with a group it meets.
func (f *xfile) slideUp(g *group) bool {
	if g.start > 0 && f.class[g.start-1] == f.class[g.end-1] {
		g.start--
		f.set(g.start, true)
		g.end--
		f.set(g.end, false)
		for f.changed(g.start - 1) {
			g.start--
		}
		return true
	}
	return false
}

// slideDown shifts g down a line when the line below equals its first.
func (f *xfile) slideDown(g *group) bool {
	if g.end < len(f.lines) && f.class[g.start] == f.class[g.end] {
		f.set(g.start, false)
		g.start++
		f.set(g.end, true)
		g.end++
		for f.changed(g.end) {
			g.end++
		}
		return true
	}
	return false
}

// maxSliding bounds how far the indent heuristic looks
// (INDENT_HEURISTIC_MAX_SLIDING).
const maxSliding = 100

// compact slides the groups of changed lines of f, keeping o's groups
// in step (xdl_change_compact).
func (d *xdiff) compact(f, o *xfile) {
	g, og := f.firstGroup(), o.firstGroup()
	for {
		if g.end != g.start {
			var earliestEnd, size int
			endMatchingOther := -1
			for {
				size = g.end - g.start
				endMatchingOther = -1
				for f.slideUp(&g) {
					o.previous(&og)
				}
				earliestEnd = g.end
				if og.end > og.start {
					endMatchingOther = g.end
				}
				for f.slideDown(&g) {
					o.next(&og)
					if og.end > og.start {
						endMatchingOther = g.end
					}
				}
				if size == g.end-g.start {
					break
				}
			}
			switch {
			case g.end == earliestEnd:
			case endMatchingOther != -1:
				for og.end == og.start {
					f.slideUp(&g)
					o.previous(&og)
				}
			default:
				best, bestScore := -1, splitScore{}
				shift := max(earliestEnd, g.end-size-1, g.end-maxSliding)
				for ; shift <= g.end; shift++ {
					s := splitScore{}
					s.add(f.measure(shift))
					s.add(f.measure(shift - size))
					if best == -1 || s.cmp(bestScore) <= 0 {
						best, bestScore = shift, s
					}
				}
				for g.end > best {
					f.slideUp(&g)
					o.previous(&og)
				}
			}
		}
		if !f.next(&g) {
			return
		}
		o.next(&og)
	}
}

// The indent heuristic's weights (xdiffi.c, tuned by its authors on a
// corpus of real diffs).
const (
	maxIndent             = 200
	maxBlanks             = 20
	startOfFilePenalty    = 1
	endOfFilePenalty      = 21
	totalBlankWeight      = -30
	postBlankWeight       = 6
	relIndentPenalty      = -4
	relIndentBlankPenalty = 10
	relOutdentPenalty     = 24
	relOutdentBlankPen    = 17
	relDedentPenalty      = 23
	relDedentBlankPenalty = 17
	indentWeight          = 60
)

// indent is a line's indentation (tabs to multiples of 8), -1 for a
// line of only whitespace.
func indent(line []byte) int {
	n := 0
	for _, c := range line {
		switch c {
		case ' ':
			n++
		case '\t':
			n += 8 - n%8
		case '\n', '\r': // git's isspace; other control bytes are text
		default:
			return n
		}
		if n >= maxIndent {
			return maxIndent
		}
	}
	return -1
}

// splitMeasure describes the lines around a split before line split.
type splitMeasure struct {
	endOfFile                   bool
	indent, preBlank, preIndent int
	postBlank, postIndent       int
}

func (f *xfile) measure(split int) splitMeasure {
	m := splitMeasure{indent: -1, preIndent: -1, postIndent: -1}
	if split >= len(f.lines) {
		m.endOfFile = true
	} else {
		m.indent = indent(f.lines[split])
	}
	for i := split - 1; i >= 0; i-- {
		if m.preIndent = indent(f.lines[i]); m.preIndent != -1 {
			break
		}
		if m.preBlank++; m.preBlank == maxBlanks {
			m.preIndent = 0
			break
		}
	}
	for i := split + 1; i < len(f.lines); i++ {
		if m.postIndent = indent(f.lines[i]); m.postIndent != -1 {
			break
		}
		if m.postBlank++; m.postBlank == maxBlanks {
			m.postIndent = 0
			break
		}
	}
	return m
}

type splitScore struct{ effectiveIndent, penalty int }

func (s *splitScore) add(m splitMeasure) {
	if m.preIndent == -1 && m.preBlank == 0 {
		s.penalty += startOfFilePenalty
	}
	if m.endOfFile {
		s.penalty += endOfFilePenalty
	}
	postBlank := 0
	if m.indent == -1 {
		postBlank = 1 + m.postBlank
	}
	totalBlank := m.preBlank + postBlank
	s.penalty += totalBlankWeight*totalBlank + postBlankWeight*postBlank
	ind := m.indent
	if ind == -1 {
		ind = m.postIndent
	}
	blanks := totalBlank != 0
	s.effectiveIndent += ind
	pick := func(withBlank, without int) int {
		if blanks {
			return withBlank
		}
		return without
	}
	switch {
	case ind == -1, m.preIndent == -1, ind == m.preIndent:
	case ind > m.preIndent:
		s.penalty += pick(relIndentBlankPenalty, relIndentPenalty)
	case m.postIndent != -1 && m.postIndent > ind:
		s.penalty += pick(relOutdentBlankPen, relOutdentPenalty)
	default:
		s.penalty += pick(relDedentBlankPenalty, relDedentPenalty)
	}
}

func (s splitScore) cmp(o splitScore) int {
	c := 0
	switch {
	case s.effectiveIndent > o.effectiveIndent:
		c = 1
	case s.effectiveIndent < o.effectiveIndent:
		c = -1
	}
	return indentWeight*c + s.penalty - o.penalty
}
