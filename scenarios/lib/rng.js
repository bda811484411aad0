// Seeded, reproducible request data. mulberry32: small, fast, good enough
// for picking test data; not for cryptography.
export function mulberry32(seed) {
  let a = seed >>> 0;
  return function next() {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// hash32 mixes a string into a 32-bit seed (FNV-1a).
export function hash32(s) {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h;
}

// streamFor gives the generator of one scenario iteration: the same seed,
// scenario and iteration number always give the same data, whichever VU
// runs it, and each scenario draws from its own stream (so the warm-up does
// not shift the measured phases' sequence).
export function streamFor(seed, scenario, iteration) {
  return mulberry32(hash32(`${seed}/${scenario}/${iteration}`));
}

export function pick(rnd, list) {
  return list[Math.floor(rnd() * list.length)];
}
