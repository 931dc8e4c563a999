package fuzz

import (
	"bytes"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
)

// mutationInputs is how many mutated inputs each target's mutation test
// runs. The tests drive the fuzz targets' checks with inputs derived from
// their seed corpora by a fixed pseudo-random sequence, without the
// coverage instrumentation of `go test -fuzz`: that instrumentation
// compiles every package the targets import a second time, which on a cold
// build cache costs minutes, while make test only needs a quick pass over
// many inputs. `make fuzz` runs the coverage-guided fuzzer.
const mutationInputs = 2000

// mutationSeed is the seed of the input sequence: NODELET_MUTATION_SEED
// when set (to explore further, or to replay another run), otherwise a
// fixed one, so that a failure replays.
func mutationSeed(t *testing.T) uint64 {
	t.Helper()
	v := os.Getenv("NODELET_MUTATION_SEED")
	if v == "" {
		return 1
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		t.Fatalf("NODELET_MUTATION_SEED=%q: %v", v, err)
	}
	return n
}

// mutate returns a copy of in changed by one to four edits: a byte set, a
// bit flipped, bytes inserted, a span deleted or repeated, or a span of
// another corpus entry spliced in.
func mutate(r *rand.Rand, in []byte, corpus [][]byte) []byte {
	b := append([]byte(nil), in...)
	for range 1 + r.IntN(4) {
		switch op := r.IntN(6); {
		case op == 0 && len(b) > 0:
			b[r.IntN(len(b))] = byte(r.UintN(256))
		case op == 1 && len(b) > 0:
			b[r.IntN(len(b))] ^= 1 << r.UintN(8)
		case op == 2:
			at := r.IntN(len(b) + 1)
			ins := make([]byte, 1+r.IntN(8))
			for i := range ins {
				ins[i] = byte(r.UintN(256))
			}
			b = append(b[:at], append(ins, b[at:]...)...)
		case op == 3 && len(b) > 0:
			from := r.IntN(len(b))
			b = append(b[:from], b[from+1+r.IntN(len(b)-from):]...)
		case op == 4 && len(b) > 0:
			from := r.IntN(len(b))
			span := append([]byte(nil), b[from:from+1+r.IntN(len(b)-from)]...)
			at := r.IntN(len(b) + 1)
			b = append(b[:at], append(span, b[at:]...)...)
		case op == 5:
			other := corpus[r.IntN(len(corpus))]
			if len(other) == 0 {
				continue
			}
			from := r.IntN(len(other))
			span := other[from : from+1+r.IntN(len(other)-from)]
			at := r.IntN(len(b) + 1)
			b = append(b[:at], append(append([]byte(nil), span...), b[at:]...)...)
		}
	}
	return b
}

func TestMutateIsDeterministicAndChanges(t *testing.T) {
	corpus := [][]byte{[]byte("abcdef"), {}, {1, 2, 3}}
	run := func() [][]byte {
		r := rand.New(rand.NewPCG(1, 0))
		var out [][]byte
		for i := range 200 {
			out = append(out, mutate(r, corpus[i%len(corpus)], corpus))
		}
		return out
	}
	a, b := run(), run()
	changed := 0
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			t.Fatalf("input %d differs between two runs of the same seed: %q, %q", i, a[i], b[i])
		}
		if !bytes.Equal(a[i], corpus[i%len(corpus)]) {
			changed++
		}
	}
	if changed < 150 {
		t.Fatalf("only %d of 200 inputs differ from their seed", changed)
	}
	if string(corpus[0]) != "abcdef" || len(corpus[1]) != 0 || string(corpus[2]) != "\x01\x02\x03" {
		t.Fatalf("mutate changed its input: %q", corpus)
	}
}

// TestPodPipelineMutations runs FuzzPodPipeline's checks on mutated seeds.
func TestPodPipelineMutations(t *testing.T) {
	runMutations(t, pipelineSeeds(), checkPipeline)
}

// TestStaticManifestMutations runs FuzzStaticManifest's checks on mutated
// seeds.
func TestStaticManifestMutations(t *testing.T) {
	runMutations(t, staticManifestSeeds(), checkStaticManifest)
}

// runMutations runs check on mutationInputs inputs mutated from seeds, each
// a subtest that logs its input when it fails. The checks make subPath
// mounts, which need root.
func runMutations(t *testing.T, seeds [][]byte, check func(*testing.T, []byte)) {
	if os.Geteuid() != 0 {
		t.Skip("subPath mounts need root")
	}
	r := rand.New(rand.NewPCG(mutationSeed(t), 0))
	for i := range mutationInputs {
		data := mutate(r, seeds[r.IntN(len(seeds))], seeds)
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("input: %q", data)
				}
			})
			check(t, data)
		})
	}
}

// TestNodeAPIMutations runs FuzzNodeAPI's checks on requests whose parts
// are mutated from the seeds'.
func TestNodeAPIMutations(t *testing.T) {
	seeds := nodeAPISeeds()
	parts := func(pick func(apiInput) []byte) [][]byte {
		out := make([][]byte, len(seeds))
		for i, s := range seeds {
			out[i] = pick(s)
		}
		return out
	}
	methods := parts(func(s apiInput) []byte { return []byte(s.method) })
	targets := parts(func(s apiInput) []byte { return []byte(s.target) })
	headers := parts(func(s apiInput) []byte { return []byte(s.headers) })
	bodies := parts(func(s apiInput) []byte { return s.body })

	fx := newAPIFixture(t)
	r := rand.New(rand.NewPCG(mutationSeed(t), 0))
	for i := range mutationInputs {
		in := seeds[r.IntN(len(seeds))]
		// Mutate one part, sometimes two.
		for range 1 + r.IntN(2) {
			switch r.IntN(5) {
			case 0:
				in.method = string(mutate(r, []byte(in.method), methods))
			case 1:
				in.target = string(mutate(r, []byte(in.target), targets))
			case 2:
				in.headers = string(mutate(r, []byte(in.headers), headers))
			case 3:
				in.body = mutate(r, in.body, bodies)
			case 4:
				in.who = uint8(r.UintN(256))
			}
		}
		t.Run(strconv.Itoa(i), func(t *testing.T) { fx.check(t, in) })
	}
}
