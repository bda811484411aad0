// Package distinct counts the distinct values of a stream in bounded
// memory: what went beyond a cap (groups of `detect`, endpoint values of a
// scenario) is counted, not kept.
package distinct

import "hash/maphash"

// Counter counts distinct strings by their 8-byte hashes (collisions are
// negligible at the bounds used), exactly up to a limit of distinct values
// and as a lower bound beyond it, and keeps the first few as examples.
//
// A Counter is not safe for concurrent use.
type Counter struct {
	limit, maxExamples int
	seed               maphash.Seed
	seen               map[uint64]struct{}
	inexact            bool
	examples           []string
	n                  int64
}

// New returns a Counter exact up to limit distinct values, keeping up to
// examples of them.
func New(limit, examples int) *Counter {
	return &Counter{limit: limit, maxExamples: examples, seed: maphash.MakeSeed(), seen: map[uint64]struct{}{}}
}

// Add counts one occurrence of s.
func (c *Counter) Add(s string) {
	c.n++
	if c.inexact {
		return
	}
	h := maphash.String(c.seed, s)
	if _, ok := c.seen[h]; ok {
		return
	}
	if len(c.seen) >= c.limit {
		c.inexact = true
		return
	}
	c.seen[h] = struct{}{}
	if len(c.examples) < c.maxExamples {
		c.examples = append(c.examples, s)
	}
}

// Distinct returns the number of distinct values and whether it is exact
// (false: a lower bound, the limit was reached).
func (c *Counter) Distinct() (n int, exact bool) { return len(c.seen), !c.inexact }

// Occurrences returns how many values were added.
func (c *Counter) Occurrences() int64 { return c.n }

// Examples returns the first distinct values (a copy).
func (c *Counter) Examples() []string { return append([]string(nil), c.examples...) }
