// The gapless frame player: each frame of PCM is scheduled on the audio context
// the moment it arrives, right after the previous one (a play cursor), so
// playback starts with the first frame and has no gaps. Counts what it plays
// (stats.js) so tests can see the frames were consumed.

import {counters} from "./stats.js";

const START_LEAD_S = 0.1;  // head start of the first frame (and after an underrun) for network jitter

export class FramePlayer {
  constructor(ctx) {
    this.ctx = ctx;
    this.sources = new Set();
    this.cursor = 0;
    this.stopped = false;
  }

  /** Schedule one frame of mono Float32 samples at `rate` right after the previous one. */
  play(samples, rate) {
    if (this.stopped || samples.length === 0) return;
    const ctx = this.ctx;
    const buffer = ctx.createBuffer(1, samples.length, rate);
    buffer.copyToChannel(samples, 0);
    const source = ctx.createBufferSource();
    source.buffer = buffer;
    source.connect(ctx.destination);
    if (this.cursor < ctx.currentTime) this.cursor = ctx.currentTime + START_LEAD_S;  // first frame, or an underrun
    source.start(this.cursor);
    this.cursor += buffer.duration;
    this.sources.add(source);
    counters.ttsFramesScheduled += 1;
    source.onended = () => {
      this.sources.delete(source);
      if (!this.stopped) counters.ttsFramesPlayed += 1;
    };
  }

  /** Seconds of scheduled audio still to play; none once stopped (Stop cut the rest). */
  get aheadS() {
    if (this.stopped) return 0;
    return Math.max(0, this.cursor - this.ctx.currentTime);
  }

  /** Call `fn` once everything scheduled has played: at once when nothing is left. */
  whenPlayed(fn) {
    const ahead = this.aheadS;
    if (ahead === 0) {
      fn();
      return null;
    }
    return setTimeout(fn, ahead * 1000);
  }

  /** Silence now: every scheduled frame is cut off. */
  stop() {
    if (this.stopped) return;
    this.stopped = true;
    counters.ttsFramesStopped += this.sources.size;
    for (const source of this.sources) source.stop();
    this.sources.clear();
    this.cursor = this.ctx.currentTime;
  }
}
