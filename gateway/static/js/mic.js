// The microphone: getUserMedia -> AudioWorklet (pcm-worklet.js) -> chunks of
// Float32 samples with their loudness. One Microphone per dictation run; it
// outlives the sockets, so audio keeps coming while a socket reconnects.

import {audioContext} from "./pcm.js";

const FLUSH_TIMEOUT_MS = 1000;
// The browser's echo cancellation, noise suppression and automatic gain are on:
// through the fake microphone they never made the recognizer worse and were
// better on espeak-ng's voice (docs/browser.md has the figures and the test).
const PROCESSING = {echoCancellation: true, noiseSuppression: true, autoGainControl: true};
const workletContexts = new WeakSet();

async function loadWorklet(ctx) {
  if (workletContexts.has(ctx)) return;
  await ctx.audioWorklet.addModule(new URL("./pcm-worklet.js", import.meta.url));
  workletContexts.add(ctx);
}

/** Why the microphone could not be opened, in words for the user. */
export function microphoneProblem(err) {
  if (!window.isSecureContext || !navigator.mediaDevices) {
    return "The microphone is only available on a secure page: open this page over https, or as http://localhost on the gateway's machine.";
  }
  if (err && err.name === "NotAllowedError") return "Microphone permission was denied. Allow it in the browser's site settings and press Start again.";
  if (err && err.name === "NotFoundError") return "No microphone was found.";
  return `The microphone could not be opened: ${err && err.message ? err.message : err}.`;
}

/** Loudness for a meter: RMS on a 60 dB scale, 0 (silence) .. 1 (full scale). */
export function levelOf(rms) {
  if (!(rms > 0)) return 0;
  return Math.max(0, Math.min(1, (20 * Math.log10(rms) + 60) / 60));
}

export class Microphone {
  /** `onChunk(samples, rms)` is called for every chunk of `chunkS` seconds; `deviceId` "" is the default. */
  constructor(onChunk, chunkS, deviceId = "") {
    this.onChunk = onChunk;
    this.chunkS = chunkS;
    this.deviceId = deviceId;
    this.stream = null;
    this.nodes = [];
    this.worklet = null;
    this.flushWaiters = [];
    this.rate = 0;
  }

  /** Open the device and start capturing; throws what getUserMedia threw. */
  async open() {
    if (!navigator.mediaDevices || !navigator.mediaDevices.getUserMedia) throw new Error("insecure");
    const ctx = await audioContext();
    await loadWorklet(ctx);
    const audio = {channelCount: 1, ...PROCESSING};
    if (this.deviceId) audio.deviceId = {ideal: this.deviceId};  // a device that is gone falls back to the default
    this.stream = await navigator.mediaDevices.getUserMedia({audio});
    this.rate = ctx.sampleRate;
    const source = ctx.createMediaStreamSource(this.stream);
    const worklet = new AudioWorkletNode(ctx, "pcm-capture", {
      processorOptions: {chunkSamples: Math.round(this.rate * this.chunkS)},
    });
    // The worklet must be pulled by the graph to run; a muted gain keeps it silent.
    const mute = ctx.createGain();
    mute.gain.value = 0;
    source.connect(worklet).connect(mute).connect(ctx.destination);
    worklet.port.onmessage = (event) => this.received(event.data);
    this.nodes = [source, worklet, mute];
    this.worklet = worklet;
  }

  received(data) {
    if (data.flushed) {
      const waiters = this.flushWaiters;
      this.flushWaiters = [];
      for (const resolve of waiters) resolve();
      return;
    }
    this.onChunk(data.samples, data.rms);
  }

  /** Resolves once every sample captured so far has been delivered (bounded wait). */
  flush() {
    if (!this.worklet) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, FLUSH_TIMEOUT_MS);
      this.flushWaiters.push(() => { clearTimeout(timer); resolve(); });
      this.worklet.port.postMessage("flush");
    });
  }

  get isOpen() {
    return this.stream !== null;
  }

  close() {
    if (this.worklet) this.worklet.port.onmessage = null;
    for (const resolve of this.flushWaiters) resolve();
    this.flushWaiters = [];
    for (const node of this.nodes) node.disconnect();
    this.nodes = [];
    this.worklet = null;
    if (this.stream) for (const track of this.stream.getTracks()) track.stop();
    this.stream = null;
  }
}
