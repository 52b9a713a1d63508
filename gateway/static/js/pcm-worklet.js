// AudioWorklet processor: collects the microphone's 128-sample render quanta
// into chunks of `chunkSamples` mono Float32 samples and posts each chunk to the
// main thread as {samples, rms} (the buffer is transferred, not copied); `rms`
// drives the level meter. Several input channels are averaged to mono.
// A "flush" message posts whatever is collected so far, then {flushed: true},
// so the main thread knows every sample captured before it asked has arrived.

class PcmCaptureProcessor extends AudioWorkletProcessor {
  constructor(options) {
    super();
    const wanted = options && options.processorOptions && options.processorOptions.chunkSamples;
    this.chunkSamples = Math.max(128, Math.floor(wanted || sampleRate / 50));
    this.chunk = new Float32Array(this.chunkSamples);
    this.filled = 0;
    this.port.onmessage = (event) => {
      if (event.data !== "flush") return;
      this.post();
      this.port.postMessage({flushed: true});
    };
  }

  post() {
    if (this.filled === 0) return;
    const samples = this.chunk.slice(0, this.filled);
    let energy = 0;
    for (let i = 0; i < samples.length; i++) energy += samples[i] * samples[i];
    this.port.postMessage({samples, rms: Math.sqrt(energy / samples.length)}, [samples.buffer]);
    this.filled = 0;
  }

  process(inputs) {
    const input = inputs[0];
    if (!input || input.length === 0) return true;
    const channels = input.length;
    const frames = input[0].length;
    for (let i = 0; i < frames; i++) {
      let sum = 0;
      for (let c = 0; c < channels; c++) sum += input[c][i];
      this.chunk[this.filled++] = sum / channels;
      if (this.filled === this.chunkSamples) this.post();
    }
    return true;
  }
}

registerProcessor("pcm-capture", PcmCaptureProcessor);
