package codec

import "sync"

// Registry hands out one Code value per name, so the caches inside a code
// (repair plans, decode matrices, the generator) are built once per process.
// Parse returns a fresh value each call; servers that receive plan
// references (code name, failure set, helper shard) should go through a
// Registry instead. The zero value is ready to use.
type Registry struct {
	mu    sync.Mutex
	codes map[string]Code
}

// Get returns the code named name, parsing it on first use.
func (r *Registry) Get(name string) (Code, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.codes[name]; ok {
		return c, nil
	}
	c, err := Parse(name)
	if err != nil {
		return nil, err
	}
	if r.codes == nil {
		r.codes = map[string]Code{}
	}
	r.codes[name] = c
	return c, nil
}

// RepairPlan returns the cached plan of code name for the failure set.
func (r *Registry) RepairPlan(name string, failed []int) (*Plan, error) {
	c, err := r.Get(name)
	if err != nil {
		return nil, err
	}
	return c.(Regenerating).RepairPlan(failed)
}
