// A QR code encoder (ISO/IEC 18004), as much as a share link needs: byte mode,
// error correction level M (15% of the symbol may be damaged), versions 1 to 10
// (up to 213 bytes). encodeQr(text) -> rows of booleans, true = dark module,
// without the quiet zone.

const FORMAT_LEVEL_M = 0b00;  // the two error-correction bits of the format information
// Per version, level M: error-correction codewords per block, then [blocks, data codewords per block] groups.
const BLOCKS_M = [
  null,
  [10, [1, 16]], [16, [1, 28]], [26, [1, 44]], [18, [2, 32]], [24, [2, 43]],
  [16, [4, 27]], [18, [4, 31]], [22, [2, 38], [2, 39]], [22, [3, 36], [2, 37]], [26, [4, 43], [1, 44]],
];
// Centre rows/columns of the alignment patterns per version.
const ALIGNMENT = [null, [], [6, 18], [6, 22], [6, 26], [6, 30], [6, 34], [6, 22, 38], [6, 24, 42], [6, 26, 46], [6, 28, 50]];
const MAX_VERSION = 10;

// ---- arithmetic in GF(2^8) with the QR polynomial x^8 + x^4 + x^3 + x^2 + 1

const EXP = new Uint8Array(512);
const LOG = new Uint8Array(256);
for (let i = 0, x = 1; i < 255; i++) {
  EXP[i] = x;
  LOG[x] = i;
  x <<= 1;
  if (x & 0x100) x ^= 0x11d;
}
for (let i = 255; i < 512; i++) EXP[i] = EXP[i - 255];

const mul = (a, b) => (a === 0 || b === 0 ? 0 : EXP[LOG[a] + LOG[b]]);

/** Reed-Solomon generator polynomial of `degree`, highest power first: prod (x - a^i). */
function generator(degree) {
  let poly = [1];
  for (let i = 0; i < degree; i++) {
    const next = new Array(poly.length + 1).fill(0);
    for (let j = 0; j < poly.length; j++) {
      next[j] ^= poly[j];
      next[j + 1] ^= mul(poly[j], EXP[i]);
    }
    poly = next;
  }
  return poly;
}

/** The `degree` error-correction codewords of one block: data * x^degree mod generator. */
function errorCorrection(data, degree) {
  const gen = generator(degree);
  const rem = new Array(degree).fill(0);
  for (const byte of data) {
    const factor = byte ^ rem.shift();
    rem.push(0);
    for (let i = 0; i < degree; i++) rem[i] ^= mul(gen[i + 1], factor);
  }
  return rem;
}

// ---- the codeword sequence

const capacityOf = (version) => BLOCKS_M[version].slice(1).reduce((n, [count, size]) => n + count * size, 0);
const countBits = (version) => (version < 10 ? 8 : 16);

function pickVersion(length) {
  for (let v = 1; v <= MAX_VERSION; v++) {
    if (4 + countBits(v) + 8 * length <= capacityOf(v) * 8) return v;
  }
  throw new Error(`too long for a QR code of version ${MAX_VERSION}: ${length} bytes`);
}

/** Mode, count, the bytes, terminator and padding, as data codewords. */
function dataCodewords(bytes, version) {
  const capacity = capacityOf(version);
  const bits = [];
  const put = (value, length) => { for (let i = length - 1; i >= 0; i--) bits.push((value >>> i) & 1); };
  put(0b0100, 4);  // byte mode
  put(bytes.length, countBits(version));
  for (const byte of bytes) put(byte, 8);
  put(0, Math.min(4, capacity * 8 - bits.length));
  while (bits.length % 8) bits.push(0);
  const out = [];
  for (let i = 0; i < bits.length; i += 8) out.push(bits.slice(i, i + 8).reduce((a, b) => (a << 1) | b, 0));
  for (let pad = 0xec; out.length < capacity; pad ^= 0xec ^ 0x11) out.push(pad);
  return out;
}

/** Split into blocks, add each block's error correction, interleave. */
function interleave(data, version) {
  const [ecPerBlock, ...groups] = BLOCKS_M[version];
  const blocks = [];
  let at = 0;
  for (const [count, size] of groups) {
    for (let i = 0; i < count; i++) {
      const block = data.slice(at, at + size);
      at += size;
      blocks.push({data: block, ec: errorCorrection(block, ecPerBlock)});
    }
  }
  const out = [];
  const longest = Math.max(...blocks.map((b) => b.data.length));
  for (let i = 0; i < longest; i++) for (const b of blocks) if (i < b.data.length) out.push(b.data[i]);
  for (let i = 0; i < ecPerBlock; i++) for (const b of blocks) out.push(b.ec[i]);
  return out;
}

// ---- the symbol

class Grid {
  constructor(size) {
    this.size = size;
    this.dark = Array.from({length: size}, () => new Array(size).fill(false));
    this.fixed = Array.from({length: size}, () => new Array(size).fill(false));
  }

  set(x, y, dark) {
    this.dark[y][x] = dark;
    this.fixed[y][x] = true;
  }

  /** A square pattern centred on (cx, cy): `darkAt(ring)` says the colour of each ring. */
  square(cx, cy, radius, darkAt) {
    for (let dy = -radius; dy <= radius; dy++) {
      for (let dx = -radius; dx <= radius; dx++) {
        const x = cx + dx;
        const y = cy + dy;
        if (x >= 0 && y >= 0 && x < this.size && y < this.size) this.set(x, y, darkAt(Math.max(Math.abs(dx), Math.abs(dy))));
      }
    }
  }
}

function drawFunctionPatterns(g, version) {
  const n = g.size;
  for (let i = 0; i < n; i++) {
    g.set(6, i, i % 2 === 0);  // timing patterns
    g.set(i, 6, i % 2 === 0);
  }
  const finder = (ring) => ring !== 2 && ring !== 4;  // ring 4 is the light separator
  g.square(3, 3, 4, finder);
  g.square(n - 4, 3, 4, finder);
  g.square(3, n - 4, 4, finder);
  const centres = ALIGNMENT[version];
  const last = centres[centres.length - 1];
  for (const cx of centres) {
    for (const cy of centres) {
      const onFinder = (cx === 6 && cy === 6) || (cx === 6 && cy === last) || (cx === last && cy === 6);
      if (!onFinder) g.square(cx, cy, 2, (ring) => ring !== 1);
    }
  }
  drawFormat(g, 0);  // reserves the format areas; drawn for real once the mask is chosen
  if (version >= 7) drawVersion(g, version);
}

function drawFormat(g, mask) {
  const data = (FORMAT_LEVEL_M << 3) | mask;
  let rem = data;
  for (let i = 0; i < 10; i++) rem = (rem << 1) ^ ((rem >>> 9) * 0x537);
  const bits = ((data << 10) | rem) ^ 0x5412;
  const bit = (i) => ((bits >>> i) & 1) === 1;
  const n = g.size;
  for (let i = 0; i <= 5; i++) g.set(8, i, bit(i));
  g.set(8, 7, bit(6));
  g.set(8, 8, bit(7));
  g.set(7, 8, bit(8));
  for (let i = 9; i < 15; i++) g.set(14 - i, 8, bit(i));
  for (let i = 0; i < 8; i++) g.set(n - 1 - i, 8, bit(i));
  for (let i = 8; i < 15; i++) g.set(8, n - 15 + i, bit(i));
  g.set(8, n - 8, true);  // always dark
}

function drawVersion(g, version) {
  let rem = version;
  for (let i = 0; i < 12; i++) rem = (rem << 1) ^ ((rem >>> 11) * 0x1f25);
  const bits = (version << 12) | rem;
  for (let i = 0; i < 18; i++) {
    const dark = ((bits >>> i) & 1) === 1;
    const a = g.size - 11 + (i % 3);
    const b = Math.floor(i / 3);
    g.set(a, b, dark);
    g.set(b, a, dark);
  }
}

/** The codewords in the two-column zigzag from the bottom right, skipping the timing column. */
function placeData(g, codewords) {
  const n = g.size;
  const total = codewords.length * 8;
  let i = 0;
  for (let right = n - 1; right >= 1; right -= 2) {
    if (right === 6) right = 5;
    const upward = ((right + 1) & 2) === 0;
    for (let step = 0; step < n; step++) {
      const y = upward ? n - 1 - step : step;
      for (const x of [right, right - 1]) {
        if (g.fixed[y][x]) continue;
        g.dark[y][x] = i < total && ((codewords[i >>> 3] >>> (7 - (i & 7))) & 1) === 1;  // remainder bits light
        i++;
      }
    }
  }
}

const MASKS = [
  (x, y) => (x + y) % 2 === 0,
  (x, y) => y % 2 === 0,
  (x, y) => x % 3 === 0,
  (x, y) => (x + y) % 3 === 0,
  (x, y) => (Math.floor(y / 2) + Math.floor(x / 3)) % 2 === 0,
  (x, y) => ((x * y) % 2) + ((x * y) % 3) === 0,
  (x, y) => (((x * y) % 2) + ((x * y) % 3)) % 2 === 0,
  (x, y) => (((x + y) % 2) + ((x * y) % 3)) % 2 === 0,
];

function applyMask(g, mask) {
  for (let y = 0; y < g.size; y++) {
    for (let x = 0; x < g.size; x++) if (!g.fixed[y][x] && MASKS[mask](x, y)) g.dark[y][x] = !g.dark[y][x];
  }
}

// ---- choosing the mask: the standard's penalty rules (lower is easier to scan)

function linePenalty(line) {
  let score = 0;
  let run = 1;
  for (let i = 1; i <= line.length; i++) {
    if (i < line.length && line[i] === line[i - 1]) run++;
    else {
      if (run >= 5) score += run - 2;
      run = 1;
    }
  }
  const at = (i) => i >= 0 && i < line.length && line[i];  // outside the symbol is light
  const light = (from, to) => { for (let k = from; k <= to; k++) if (at(k)) return false; return true; };
  for (let i = 0; i + 7 <= line.length; i++) {
    const finderLike = at(i) && !at(i + 1) && at(i + 2) && at(i + 3) && at(i + 4) && !at(i + 5) && at(i + 6);
    if (finderLike && (light(i - 4, i - 1) || light(i + 7, i + 10))) score += 40;
  }
  return score;
}

function penalty(g) {
  const n = g.size;
  const d = g.dark;
  let score = 0;
  let dark = 0;
  for (let a = 0; a < n; a++) {
    score += linePenalty(d[a]) + linePenalty(d.map((row) => row[a]));
    for (let b = 0; b < n; b++) {
      if (d[a][b]) dark++;
      if (a < n - 1 && b < n - 1 && d[a][b] === d[a][b + 1] && d[a][b] === d[a + 1][b] && d[a][b] === d[a + 1][b + 1]) score += 3;
    }
  }
  return score + Math.floor(Math.abs(dark * 100 / (n * n) - 50) / 5) * 10;
}

/** The QR code of `text` (UTF-8, byte mode, level M): rows of booleans, true = dark. */
export function encodeQr(text) {
  const bytes = new TextEncoder().encode(text);
  const version = pickVersion(bytes.length);
  const codewords = interleave(dataCodewords(bytes, version), version);
  let best = null;
  for (let mask = 0; mask < MASKS.length; mask++) {
    const g = new Grid(17 + 4 * version);
    drawFunctionPatterns(g, version);
    placeData(g, codewords);
    applyMask(g, mask);
    drawFormat(g, mask);
    const score = penalty(g);
    if (best === null || score < best.score) best = {g, score};
  }
  return best.g.dark;
}
