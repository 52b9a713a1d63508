// Live dictation: microphone -> AudioWorklet -> s16le binary messages on
// /v1/dictation at the audio context's own rate; partial and final transcript
// events back. One DictationSession per Start; Stop sends {"type":"end"} and
// waits (bounded) for the server's `closed` and close.

import {socketUrl} from "./api.js";
import {describeClose, needsSignIn} from "./close-codes.js";
import {audioContext, floatToS16le} from "./pcm.js";

const CHUNK_S = 0.05;            // 50 ms of audio per binary message
const READY_TIMEOUT_MS = 20000;  // the socket must say `ready` within this
const CLOSE_TIMEOUT_MS = 15000;  // after `end`, the final and the close must come within this
const MAX_BUFFERED_S = 5;        // audio the socket may hold unsent before chunks are dropped
const workletContexts = new WeakSet();

async function loadWorklet(ctx) {
  if (workletContexts.has(ctx)) return;
  await ctx.audioWorklet.addModule(new URL("./pcm-worklet.js", import.meta.url));
  workletContexts.add(ctx);
}

function microphoneProblem(err) {
  if (!window.isSecureContext || !navigator.mediaDevices) {
    return "The microphone is only available on a secure page: open this page over https, or as http://localhost on the gateway's machine.";
  }
  if (err && err.name === "NotAllowedError") return "Microphone permission was denied. Allow it in the browser's site settings and press Start again.";
  if (err && err.name === "NotFoundError") return "No microphone was found.";
  return `The microphone could not be opened: ${err && err.message ? err.message : err}.`;
}

/** The dictation panel: wires the Start/Stop button to one session at a time. */
export class DictationPanel {
  constructor(elements, {onSignInNeeded}) {
    this.el = elements;
    this.onSignInNeeded = onSignInNeeded;
    this.session = null;
    this.available = false;
    this.el.toggle.addEventListener("click", () => this.toggle());
  }

  /** Enable or disable Start, with the engine note that explains why. */
  setAvailable(available, note) {
    this.available = available;
    this.el.note.innerHTML = "";
    if (note) this.el.note.append(note);
    if (!this.session) this.el.toggle.disabled = !available;
  }

  toggle() {
    if (this.session) this.session.stop();
    else this.start();
  }

  async start() {
    this.el.problem.textContent = "";
    this.el.toggle.disabled = true;
    const session = new DictationSession(this);
    this.session = session;
    this.setButton(true);
    await session.run();
  }

  setButton(live) {
    this.el.toggle.textContent = live ? "Stop dictation" : "Start dictation";
    this.el.toggle.dataset.live = live ? "true" : "false";  // the label says the state; styling only
  }

  setState(text) {
    this.el.state.textContent = text;
  }

  showPartial(text, stable) {
    // `stable` is a prefix of `text` by contract; anything else is shown as unstable
    const prefix = stable && text.startsWith(stable) ? stable : "";
    this.el.partialStable.textContent = prefix;
    this.el.partialUnstable.textContent = text.slice(prefix.length);
  }

  addFinal(text) {
    this.showPartial("", "");
    if (!text.trim()) return;
    const line = document.createElement("p");
    line.className = "final";
    line.textContent = text.trim();
    this.el.finals.append(line);
    line.scrollIntoView({block: "nearest"});
  }

  showProblem(text) {
    this.el.problem.textContent = text;
  }

  ended(session, message, signIn) {
    if (this.session !== session) return;
    this.session = null;
    this.setButton(false);
    this.el.toggle.disabled = !this.available;
    if (message) this.setState("");
    else if (!session.sawClosed) this.setState("Stopped.");
    if (message) this.showProblem(message);
    if (signIn) this.onSignInNeeded();
  }
}

/** One dictation socket with its microphone; cleans every resource up exactly once. */
class DictationSession {
  constructor(panel) {
    this.panel = panel;
    this.ws = null;
    this.stream = null;
    this.nodes = [];
    this.stopping = false;
    this.done = false;
    this.timers = [];
    this.dropped = false;
  }

  async run() {
    const panel = this.panel;
    panel.setState("Opening the microphone…");
    let ctx;
    try {
      if (!navigator.mediaDevices || !navigator.mediaDevices.getUserMedia) throw new Error("insecure");
      ctx = await audioContext();
      await loadWorklet(ctx);
      this.stream = await navigator.mediaDevices.getUserMedia({
        audio: {channelCount: 1, echoCancellation: true, noiseSuppression: false, autoGainControl: true},
      });
    } catch (err) {
      this.finish(microphoneProblem(err));
      return;
    }
    if (this.stopping) { this.finish(""); return; }
    this.rate = ctx.sampleRate;
    panel.el.toggle.disabled = false;  // Stop works while the socket is still connecting
    panel.setState("Connecting…");
    this.connect(ctx);
  }

  connect(ctx) {
    const ws = new WebSocket(socketUrl("/v1/dictation", {sample_rate: String(this.rate), encoding: "pcm_s16le"}));
    ws.binaryType = "arraybuffer";
    this.ws = ws;
    this.later(READY_TIMEOUT_MS, () => {
      if (!this.ready) this.finish("The gateway did not start the dictation session in time.");
    });
    ws.onmessage = (event) => {
      if (typeof event.data !== "string") return;
      let msg;
      try { msg = JSON.parse(event.data); } catch { return; }
      this.onEvent(msg, ctx);
    };
    ws.onclose = (event) => {
      // a socket the user stopped before it was up closes without a code: nothing to explain
      const quiet = this.stopping && (event.code === 1005 || event.code === 1006);
      this.finish(quiet ? "" : describeClose("Dictation", event.code, event.reason), needsSignIn(event.code, event.reason));
    };
  }

  onEvent(msg, ctx) {
    const panel = this.panel;
    switch (msg.type) {
      case "ready":
        this.ready = true;
        panel.setState(`Listening (${msg.model || "ASR"}, ${this.rate} Hz). Speak now.`);
        if (!this.stopping) this.startCapture(ctx);
        break;
      case "speech_started":
        panel.setState("Hearing speech…");
        break;
      case "partial":
        panel.showPartial(String(msg.text || ""), String(msg.stable || ""));
        break;
      case "final":
        panel.addFinal(String(msg.text || ""));
        if (!this.stopping) panel.setState("Listening. Speak now.");
        break;
      case "error":
        panel.showProblem(`${msg.message || "Error"} (${msg.code})${msg.retryable ? " — retrying, nothing is lost." : ""}`);
        break;
      case "closed":
        this.sawClosed = true;
        panel.setState(`Done: ${msg.utterances} utterance(s), ${msg.audio_s} s of audio.`);
        break;
      default:
        break;
    }
  }

  startCapture(ctx) {
    const source = ctx.createMediaStreamSource(this.stream);
    const worklet = new AudioWorkletNode(ctx, "pcm-capture", {
      processorOptions: {chunkSamples: Math.round(this.rate * CHUNK_S)},
    });
    // The worklet must be pulled by the graph to run; a muted gain keeps it silent.
    const mute = ctx.createGain();
    mute.gain.value = 0;
    source.connect(worklet).connect(mute).connect(ctx.destination);
    worklet.port.onmessage = (event) => this.sendAudio(event.data);
    this.nodes = [source, worklet, mute];
    this.worklet = worklet;
    this.panel.el.toggle.disabled = false;
  }

  sendAudio(samples) {
    const ws = this.ws;
    if (!ws || ws.readyState !== WebSocket.OPEN || this.stopping) return;
    if (ws.bufferedAmount > this.rate * 2 * MAX_BUFFERED_S) {
      if (!this.dropped) this.panel.showProblem("The connection is too slow: some audio is being dropped.");
      this.dropped = true;
      return;
    }
    ws.send(floatToS16le(samples));
  }

  releaseMicrophone() {
    if (this.worklet) this.worklet.port.onmessage = null;
    for (const node of this.nodes) node.disconnect();
    this.nodes = [];
    if (this.stream) for (const track of this.stream.getTracks()) track.stop();
    this.stream = null;
  }

  /** Stop: no more audio, ask for the last final, close when the server has answered. */
  stop() {
    if (this.stopping) return;
    this.stopping = true;
    this.panel.el.toggle.disabled = true;
    this.releaseMicrophone();
    const ws = this.ws;
    if (!ws || ws.readyState !== WebSocket.OPEN) {
      if (ws && ws.readyState === WebSocket.CONNECTING) ws.close();
      if (!ws) this.finish("");
      return;
    }
    this.panel.setState("Finishing the last sentence…");
    ws.send(JSON.stringify({type: "end"}));
    this.later(CLOSE_TIMEOUT_MS, () => this.finish("The gateway did not finish in time; the connection was closed."));
  }

  later(ms, fn) {
    this.timers.push(setTimeout(fn, ms));
  }

  finish(message, signIn = false) {
    if (this.done) return;
    this.done = true;
    for (const t of this.timers) clearTimeout(t);
    this.releaseMicrophone();
    if (this.ws && this.ws.readyState <= WebSocket.OPEN) this.ws.close();
    this.panel.ended(this, message, signIn);
  }
}
