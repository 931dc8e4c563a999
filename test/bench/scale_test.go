package bench

import (
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
)

// fit is a least-squares line y = intercept + slope·x.
type fit struct{ slope, intercept float64 }

// leastSquares fits a line through the points (xs[i], ys[i]); NaN
// without two distinct xs.
func leastSquares(xs, ys []float64) fit {
	if len(xs) < 2 || len(xs) != len(ys) {
		return fit{slope: nan, intercept: nan}
	}
	var mx, my float64
	for i := range xs {
		mx += xs[i]
		my += ys[i]
	}
	mx /= float64(len(xs))
	my /= float64(len(ys))
	var sxx, sxy float64
	for i := range xs {
		sxx += (xs[i] - mx) * (xs[i] - mx)
		sxy += (xs[i] - mx) * (ys[i] - my)
	}
	if sxx == 0 {
		return fit{slope: nan, intercept: nan}
	}
	slope := sxy / sxx
	return fit{slope: slope, intercept: my - slope*mx}
}

// growth is the slope of the curve's last segment (between its two
// largest xs; xs ascending) divided by the least-squares slope f: about 1
// on a straight line, above for a cost that grows faster than linear,
// below for one that flattens. NaN with fewer than three points or a fit
// that does not rise.
func growth(xs, ys []float64, f fit) float64 {
	if len(xs) < 3 || len(xs) != len(ys) || !known(f.slope) || f.slope <= 0 {
		return nan
	}
	i := len(xs) - 1
	if xs[i] == xs[i-1] {
		return nan
	}
	return (ys[i] - ys[i-1]) / (xs[i] - xs[i-1]) / f.slope
}

// curve is an agent's scale curve: the idle point (0 pods) and its
// bursts, with the cost per pod fitted over all of them.
type curve struct {
	pods                  []float64
	rssY, cpuY            []float64
	readyY, goneY         []float64
	rss, cpu, ready, gone fit
	rssGrowth, cpuGrowth  float64
}

// curveOf fits r's points: resident memory when all pods were Ready (the
// idle agent's at 0 pods), CPU over start and teardown (none at 0 pods),
// all Ready and all gone (zero at 0 pods).
func curveOf(r agentRun) curve {
	c := curve{
		pods: []float64{0}, rssY: []float64{float64(r.idle.rss)},
		cpuY: []float64{0}, readyY: []float64{0}, goneY: []float64{0},
	}
	for _, p := range r.points {
		c.pods = append(c.pods, float64(p.pods))
		c.rssY = append(c.rssY, float64(p.mem.rss))
		c.cpuY = append(c.cpuY, (p.cpuStart + p.cpuTeardown).Seconds())
		c.readyY = append(c.readyY, p.allReady.Seconds())
		c.goneY = append(c.goneY, p.allGone.Seconds())
	}
	c.rss = leastSquares(c.pods, c.rssY)
	c.cpu = leastSquares(c.pods, c.cpuY)
	c.ready = leastSquares(c.pods, c.readyY)
	c.gone = leastSquares(c.pods, c.goneY)
	c.rssGrowth = growth(c.pods, c.rssY, c.rss)
	c.cpuGrowth = growth(c.pods, c.cpuY, c.cpu)
	return c
}

// linearity says whether growth g is within superlinearFactor.
func linearity(g float64) string {
	switch {
	case !known(g):
		return "n/a"
	case g > superlinearFactor:
		return "faster than linear"
	}
	return "linear"
}

// printCurve writes an agent's scale curve, with the CRI floor's bursts of
// the same sizes, and its marginal cost per pod.
func printCurve(r agentRun, fr floorRun, maxPods int) {
	fmt.Println()
	fmt.Printf("scale curve, %s (node %s, maxPods %d, %s)\n", r.name, benchNode, maxPods, machine())
	if len(r.points) == 0 {
		fmt.Println("not measured")
		return
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "pods\tall Ready\tCRI floor\tall gone\tCRI teardown\tRSS, all Ready\tanon / file\tpeak RSS\tCPU start\tCPU teardown\tAPI requests/pod\t")
	fmt.Fprintf(tw, "0 (idle)\t—\t—\t—\t—\t%s\t%s / %s\t%s\t—\t—\t—\t\n", fmtMiB(float64(r.idle.rss)),
		fmtMiB(float64(r.idle.anon)), fmtMiB(float64(r.idle.file)), fmtMiB(float64(r.idle.peak)))
	for _, p := range r.points {
		floorStart, floorRemove := "—", "—"
		if f, ok := fr.bursts[p.pods]; ok {
			floorStart, floorRemove = fmtDur(f.start), fmtDur(f.remove)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s / %s\t%s\t%s\t%s\t%.2f\t\n", p.pods,
			fmtDur(p.allReady), floorStart, fmtDur(p.allGone), floorRemove,
			fmtMiB(float64(p.mem.rss)), fmtMiB(float64(p.mem.anon)), fmtMiB(float64(p.mem.file)), fmtMiB(float64(p.peak)),
			fmtSeconds(p.cpuStart.Seconds()), fmtSeconds(p.cpuTeardown.Seconds()), p.requests[""]/float64(p.pods))
	}
	_ = tw.Flush()
	c := curveOf(r)
	pods := make([]string, len(c.pods))
	for i, x := range c.pods {
		pods[i] = fmt.Sprint(x)
	}
	fmt.Printf("marginal cost per pod (least squares over %s pods): RSS %s, CPU %s, all Ready %s, all gone %s\n",
		strings.Join(pods, ", "), fmtKiB(c.rss.slope), fmtMillis(c.cpu.slope), fmtMillis(c.ready.slope), fmtMillis(c.gone.slope))
	fmt.Printf("last segment ÷ marginal: RSS %.2f× (%s), CPU %.2f× (%s); above %.1f× is faster than linear\n",
		c.rssGrowth, linearity(c.rssGrowth), c.cpuGrowth, linearity(c.cpuGrowth), superlinearFactor)
	fmt.Println()
}
