//go:build !amd64 || purego

package codec

import "unsafe"

// Without the amd64 kernels every caller takes the library path.
const (
	hasGFNI     = false
	gfniMaxRows = 0
)

func gfniClayRows(rows int, mat *uint64, cols int, from, to int, ptrs *unsafe.Pointer, kinds *byte, tasks int, lo uint64, blocks int, fix *unsafe.Pointer, planes, stride int, d uint64) {
	panic("codec: gfni kernels are not built for this platform")
}

func gfniSparse(from, to int, ptrs *unsafe.Pointer, mats *uint64, terms *int, tasks int) {
	panic("codec: gfni kernels are not built for this platform")
}
