// The proof-of-work solver, run in a Web Worker so the page stays responsive. It looks for a nonce
// such that SHA-256 of the challenge (64 ASCII bytes: exactly one block) followed by the nonce's
// decimal digits has `difficulty` leading zero bits. The challenge's block is hashed once; each
// nonce then costs one compression of a second block, which is what a bot's native code pays too.
//
// Message in:  {challenge, difficulty, start, step}  (nonces start, start+step, ...)
// Messages out: {tried}  every few thousand nonces (for the page's progress)
//               {nonce}  the answer, as decimal digits
'use strict';

const K = new Uint32Array([
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
  0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
  0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
  0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
  0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
  0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
  0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
  0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
]);
const IV = new Uint32Array([
  0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
]);

const W = new Uint32Array(64);

// compress runs SHA-256's compression function on the 16 words of block (W[0..15] filled by the
// caller) from state `from` into state `into`.
function compress(from, into) {
  for (let i = 16; i < 64; i++) {
    const a = W[i - 15], b = W[i - 2];
    const s0 = ((a >>> 7) | (a << 25)) ^ ((a >>> 18) | (a << 14)) ^ (a >>> 3);
    const s1 = ((b >>> 17) | (b << 15)) ^ ((b >>> 19) | (b << 13)) ^ (b >>> 10);
    W[i] = (W[i - 16] + s0 + W[i - 7] + s1) | 0;
  }
  let a = from[0], b = from[1], c = from[2], d = from[3], e = from[4], f = from[5], g = from[6], h = from[7];
  for (let i = 0; i < 64; i++) {
    const S1 = ((e >>> 6) | (e << 26)) ^ ((e >>> 11) | (e << 21)) ^ ((e >>> 25) | (e << 7));
    const t1 = (h + S1 + ((e & f) ^ (~e & g)) + K[i] + W[i]) | 0;
    const S0 = ((a >>> 2) | (a << 30)) ^ ((a >>> 13) | (a << 19)) ^ ((a >>> 22) | (a << 10));
    const t2 = (S0 + ((a & b) ^ (a & c) ^ (b & c))) | 0;
    h = g; g = f; f = e; e = (d + t1) | 0; d = c; c = b; b = a; a = (t1 + t2) | 0;
  }
  into[0] = from[0] + a; into[1] = from[1] + b; into[2] = from[2] + c; into[3] = from[3] + d;
  into[4] = from[4] + e; into[5] = from[5] + f; into[6] = from[6] + g; into[7] = from[7] + h;
}

// zeroBits counts the leading zero bits of a state.
function zeroBits(s) {
  let n = 0;
  for (let i = 0; i < 8; i++) {
    if (s[i] !== 0) return n + Math.clz32(s[i]);
    n += 32;
  }
  return n;
}

// solve returns the first nonce of start, start+step, ... that meets difficulty, calling report
// with the count tried every 8192 nonces.
function solve(challenge, difficulty, start, step, report) {
  if (challenge.length !== 64) throw new Error('a challenge is 64 characters');
  for (let i = 0; i < 16; i++) {
    W[i] = (challenge.charCodeAt(4 * i) << 24) | (challenge.charCodeAt(4 * i + 1) << 16) |
      (challenge.charCodeAt(4 * i + 2) << 8) | challenge.charCodeAt(4 * i + 3);
  }
  const mid = new Uint32Array(8);
  compress(IV, mid);
  const out = new Uint32Array(8);
  const bytes = new Uint8Array(64);
  let tried = 0;
  for (let nonce = start; ; nonce += step) {
    const digits = String(nonce);
    const n = digits.length;
    bytes.fill(0);
    for (let i = 0; i < n; i++) bytes[i] = digits.charCodeAt(i);
    bytes[n] = 0x80;
    const bitLen = (64 + n) * 8; // the message's length in bits, the block's last word
    bytes[62] = bitLen >>> 8;
    bytes[63] = bitLen & 0xff;
    for (let i = 0; i < 16; i++) {
      W[i] = (bytes[4 * i] << 24) | (bytes[4 * i + 1] << 16) | (bytes[4 * i + 2] << 8) | bytes[4 * i + 3];
    }
    compress(mid, out);
    if (zeroBits(out) >= difficulty) return digits;
    if (++tried % 8192 === 0 && report) report(tried);
  }
}

if (typeof self !== 'undefined' && typeof self.postMessage === 'function' && typeof module === 'undefined') {
  self.onmessage = (ev) => {
    const {challenge, difficulty, start, step} = ev.data;
    const nonce = solve(challenge, difficulty, start || 0, step || 1, (tried) => self.postMessage({tried}));
    self.postMessage({nonce});
  };
}
if (typeof module !== 'undefined') module.exports = {solve};
