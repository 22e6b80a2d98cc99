//go:build amd64 && !purego

package codec

import "golang.org/x/sys/cpu"

//go:generate go run gfni_gen.go

// hasGFNI reports whether the batched kernels of gfni_amd64.s run here:
// they use EVEX-encoded GFNI on 512-bit vectors, byte masks (AVX512BW) for
// the tails and BZHI (BMI2) to build those masks. Read-only after start-up.
var hasGFNI = cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512GFNI && cpu.X86.HasBMI2
