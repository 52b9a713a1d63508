// What was spoken, kept as it arrives and handed out as a 16-bit mono WAV file.

export const MAX_KEPT_S = 600;  // ten minutes of speech at most is kept for the download

export class SpokenAudio {
  constructor() {
    this.chunks = [];
    this.samples = 0;
    this.rate = 0;
    this.truncated = false;
  }

  add(samples, rate) {
    if (samples.length === 0) return;
    this.rate = rate;
    const room = Math.round(MAX_KEPT_S * rate) - this.samples;
    if (room <= 0) { this.truncated = true; return; }
    const kept = samples.length > room ? samples.slice(0, room) : samples;  // each frame is a fresh array
    if (kept.length < samples.length) this.truncated = true;
    this.chunks.push(kept);
    this.samples += kept.length;
  }

  get seconds() {
    return this.rate ? this.samples / this.rate : 0;
  }

  /** A RIFF/WAVE file: PCM, 16-bit, mono, at the rate the frames came at. */
  toWav() {
    const data = this.samples * 2;
    const view = new DataView(new ArrayBuffer(44 + data));
    const text = (offset, s) => { for (let i = 0; i < s.length; i++) view.setUint8(offset + i, s.charCodeAt(i)); };
    text(0, "RIFF");
    view.setUint32(4, 36 + data, true);
    text(8, "WAVE");
    text(12, "fmt ");
    view.setUint32(16, 16, true);
    view.setUint16(20, 1, true);               // PCM
    view.setUint16(22, 1, true);               // mono
    view.setUint32(24, this.rate, true);
    view.setUint32(28, this.rate * 2, true);   // bytes per second
    view.setUint16(32, 2, true);               // bytes per sample frame
    view.setUint16(34, 16, true);
    text(36, "data");
    view.setUint32(40, data, true);
    let offset = 44;
    for (const chunk of this.chunks) {
      for (let i = 0; i < chunk.length; i++, offset += 2) {
        const s = Math.max(-1, Math.min(1, chunk[i]));
        view.setInt16(offset, s < 0 ? Math.round(s * 0x8000) : Math.round(s * 0x7fff), true);
      }
    }
    return new Blob([view.buffer], {type: "audio/wav"});
  }
}
