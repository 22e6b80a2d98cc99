package codec

import "fmt"

// newFamily builds the codes other than RS. It is the one place where new
// families are registered.
func newFamily(fam Family, k, m int, name string) (Code, error) {
	return nil, fmt.Errorf("%w %q: unknown family %q (known: rs)", ErrBadName, name, fam)
}
