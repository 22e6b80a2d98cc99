package codec

import "fmt"

// newFamily builds the codes other than RS. It is the one place where new
// families are registered.
func newFamily(fam Family, k, m int, name string) (Code, error) {
	switch fam {
	case FamilyClay:
		return NewClay(k, m)
	case FamilyPM:
		return NewPM(k, m)
	}
	return nil, fmt.Errorf("%w %q: unknown family %q (known: rs, clay, pm)", ErrBadName, name, fam)
}
