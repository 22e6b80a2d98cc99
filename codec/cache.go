package codec

import "sync"

// Cache is Parse with memory: each name is parsed once per Cache and the
// same Code returned after. Building a code is not free (about 0.3 ms for
// clay-10-4, whose matrices are derived on construction) and a Code keeps
// its own caches (Clay's repair plans per failure set), which a fresh
// Parse per call throws away. Callers that meet codes by name on hot
// paths (a lookup per request, a repair plan per stripe, a scan per
// manifest) keep one Cache for their lifetime. The zero value is ready.
type Cache struct {
	codes sync.Map // name -> Code
}

// Get returns the code named name, parsing it on first use. Names that
// fail to parse are not remembered: the error is returned each time.
//
// A nil Cache parses every time.
func (c *Cache) Get(name string) (Code, error) {
	if c == nil {
		return Parse(name)
	}
	if v, ok := c.codes.Load(name); ok {
		return v.(Code), nil
	}
	code, err := Parse(name)
	if err != nil {
		return nil, err
	}
	v, _ := c.codes.LoadOrStore(name, code)
	return v.(Code), nil
}
