package bench

import (
	"math"
	"testing"
	"time"
)

func TestLeastSquares(t *testing.T) {
	for _, tc := range []struct {
		name             string
		xs, ys           []float64
		slope, intercept float64
		wantNaN          bool
	}{
		{name: "a straight line", xs: []float64{0, 50, 110, 250}, ys: []float64{30, 35, 41, 55}, slope: 0.1, intercept: 30},
		{name: "points around a line", xs: []float64{0, 1, 2, 3}, ys: []float64{1, 2.9, 5.1, 7}, slope: 2.02, intercept: 0.97},
		{name: "one point", xs: []float64{110}, ys: []float64{3}, wantNaN: true},
		{name: "one x twice", xs: []float64{110, 110}, ys: []float64{3, 4}, wantNaN: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := leastSquares(tc.xs, tc.ys)
			if tc.wantNaN {
				if known(f.slope) {
					t.Errorf("slope = %v, want NaN", f.slope)
				}
				return
			}
			if math.Abs(f.slope-tc.slope) > 1e-9 || math.Abs(f.intercept-tc.intercept) > 1e-9 {
				t.Errorf("leastSquares = %+v, want slope %v, intercept %v", f, tc.slope, tc.intercept)
			}
		})
	}
}

func TestGrowth(t *testing.T) {
	xs := []float64{0, 50, 110, 250}
	for _, tc := range []struct {
		name    string
		ys      []float64
		want    string
		wantNaN bool
	}{
		{name: "linear", ys: []float64{0, 5, 11, 25}, want: "linear"},
		{name: "a fixed cost, then linear", ys: []float64{30, 35, 41, 55}, want: "linear"},
		{name: "quadratic", ys: []float64{0, 2500, 12100, 62500}, want: "faster than linear"},
		{name: "flattening", ys: []float64{0, 10, 15, 16}, want: "linear"},
		{name: "flat", ys: []float64{7, 7, 7, 7}, want: "n/a", wantNaN: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := growth(xs, tc.ys, leastSquares(xs, tc.ys))
			if known(g) == tc.wantNaN {
				t.Errorf("growth = %v, want NaN: %v", g, tc.wantNaN)
			}
			if got := linearity(g); got != tc.want {
				t.Errorf("linearity(%v) = %q, want %q", g, got, tc.want)
			}
		})
	}
	if g := growth([]float64{0, 110}, []float64{0, 11}, fit{slope: 0.1}); known(g) {
		t.Errorf("growth of two points = %v, want NaN", g)
	}
}

func TestCurveOf(t *testing.T) {
	r := agentRun{
		idle: memSplit{rss: 30 * mib},
		points: []point{
			{pods: 50, mem: memSplit{rss: 35 * mib}, cpuStart: 400 * time.Millisecond, cpuTeardown: 100 * time.Millisecond, allReady: 5 * time.Second, allGone: 6 * time.Second},
			{pods: 100, mem: memSplit{rss: 40 * mib}, cpuStart: 800 * time.Millisecond, cpuTeardown: 200 * time.Millisecond, allReady: 10 * time.Second, allGone: 12 * time.Second},
		},
	}
	c := curveOf(r)
	if math.Abs(c.rss.slope-0.1*mib) > 1e-6 {
		t.Errorf("RSS per pod = %v, want %v", c.rss.slope, 0.1*mib)
	}
	if math.Abs(c.cpu.slope-0.01) > 1e-9 {
		t.Errorf("CPU per pod = %v s, want 0.01 s", c.cpu.slope)
	}
	if math.Abs(c.ready.slope-0.1) > 1e-9 || math.Abs(c.gone.slope-0.12) > 1e-9 {
		t.Errorf("all Ready / all gone per pod = %v / %v s, want 0.1 / 0.12 s", c.ready.slope, c.gone.slope)
	}
	if math.Abs(c.rssGrowth-1) > 1e-9 || math.Abs(c.cpuGrowth-1) > 1e-9 {
		t.Errorf("growth of straight lines = %v, %v; want 1", c.rssGrowth, c.cpuGrowth)
	}
	if empty := curveOf(agentRun{}); known(empty.rss.slope) {
		t.Errorf("a curve of the idle point alone has slope %v, want NaN", empty.rss.slope)
	}
}
