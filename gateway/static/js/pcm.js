// PCM conversions and the audio context both panels share.

// The gateway accepts 8000..48000 Hz; a context outside that range (some devices
// run at 96 kHz) is replaced by one at 48 kHz, which the browser resamples to.
export const MIN_RATE = 8000;
export const MAX_RATE = 48000;

let shared = null;

/** The page's AudioContext, made on first use (call it from a click: autoplay rules). */
export async function audioContext() {
  if (shared === null || shared.state === "closed") {
    shared = new AudioContext({latencyHint: "interactive"});
    if (shared.sampleRate < MIN_RATE || shared.sampleRate > MAX_RATE) {
      await shared.close();
      shared = new AudioContext({latencyHint: "interactive", sampleRate: MAX_RATE});
    }
  }
  if (shared.state === "suspended") await shared.resume();
  return shared;
}

/** Float32 samples in [-1, 1] to little-endian signed 16-bit PCM (clipped). */
export function floatToS16le(samples) {
  const out = new DataView(new ArrayBuffer(samples.length * 2));
  for (let i = 0; i < samples.length; i++) {
    const s = Math.max(-1, Math.min(1, samples[i]));
    out.setInt16(i * 2, s < 0 ? Math.round(s * 0x8000) : Math.round(s * 0x7fff), true);
  }
  return out.buffer;
}

/**
 * Turns binary messages of little-endian float32 PCM into Float32Arrays, keeping
 * a trailing partial sample for the next message so no sample is ever split.
 */
export class F32Reader {
  constructor() {
    this.carry = new Uint8Array(0);
  }

  push(arrayBuffer) {
    let bytes = new Uint8Array(arrayBuffer);
    if (this.carry.length) {
      const joined = new Uint8Array(this.carry.length + bytes.length);
      joined.set(this.carry);
      joined.set(bytes, this.carry.length);
      bytes = joined;
    }
    const whole = bytes.length - (bytes.length % 4);
    this.carry = bytes.slice(whole);
    const view = new DataView(bytes.buffer, bytes.byteOffset, whole);
    const out = new Float32Array(whole / 4);
    for (let i = 0; i < out.length; i++) out[i] = view.getFloat32(i * 4, true);
    return out;
  }
}
