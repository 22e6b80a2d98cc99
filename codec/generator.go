package codec

import "fmt"

// generator holds, for every shard a and sub-chunk z, the row g(a,z) over the
// K = k*alpha data sub-symbols with stored sub-chunk = g . data. It is built
// by running the code's own encoder on the identity: data sub-chunk j is the
// unit vector e_j, one byte per data symbol, so the encoder's position-wise
// arithmetic computes the rows themselves. The planner, the rank tests and
// the generic decoders all read the code through it, so they also check the
// encoder.
type generator struct {
	n, k, alpha, width int
	rows               [][]byte // rows[a*alpha+z]
}

// maxGeneratorBytes bounds the n*k*alpha^2 bytes of a generator; (14,10)
// Clay needs 9 MiB.
const maxGeneratorBytes = 64 << 20

func buildGenerator(c Code) (*generator, error) {
	n, k, a := c.TotalShards(), c.DataShards(), c.SubChunks()
	width := k * a
	if n*a*width > maxGeneratorBytes {
		return nil, fmt.Errorf("%w: %s: generator needs %d MiB, limit %d MiB", ErrBadParams, c.Name(), n*a*width>>20, maxGeneratorBytes>>20)
	}
	shards := make([][]byte, n)
	for i := range shards {
		shards[i] = make([]byte, a*width)
	}
	for i := 0; i < k; i++ {
		for z := 0; z < a; z++ {
			shards[i][z*width+i*a+z] = 1
		}
	}
	if err := c.Encode(shards); err != nil {
		return nil, fmt.Errorf("codec: %s: symbolic encode: %w", c.Name(), err)
	}
	g := &generator{n: n, k: k, alpha: a, width: width, rows: make([][]byte, n*a)}
	for s := 0; s < n; s++ {
		for z := 0; z < a; z++ {
			g.rows[s*a+z] = shards[s][z*width : (z+1)*width : (z+1)*width]
		}
	}
	return g, nil
}

// row returns g(a, z); callers must not modify it.
func (g *generator) row(a, z int) []byte { return g.rows[a*g.alpha+z] }

// combo returns sum_s coef[s] * g(a, s), the functional of a helper that
// sends a linear combination of its sub-chunks.
func (g *generator) combo(a int, coef []byte) []byte {
	v := make([]byte, g.width)
	for s, c := range coef {
		mulXor(c, g.row(a, s), v)
	}
	return v
}
