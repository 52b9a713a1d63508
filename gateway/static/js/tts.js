// The TTS player: text + voice -> /v1/tts (pcm_f32le at the audio context's
// rate); every binary frame is scheduled on the context as it arrives, right
// after the previous one (a play cursor), so playback starts with the first
// frame and has no gaps. One socket per Speak; Stop sends {"type":"cancel"}.

import {socketUrl} from "./api.js";
import {describeClose, needsSignIn} from "./close-codes.js";
import {F32Reader, audioContext} from "./pcm.js";

const START_LEAD_S = 0.1;        // head start of the first frame (and after an underrun) for network jitter
const QUIET_TIMEOUT_MS = 30000;  // a socket that says nothing for this long is given up
const UTTERANCE_ID = "page-1";

/** The end-of-utterance numbers as a sentence. */
export function describeStats(end) {
  const ttfa = Number(end.ttfa_ms).toFixed(0);
  const rtf = Number(end.rtf).toFixed(2);
  return `First audio after ${ttfa} ms · real-time factor ${rtf} · ${end.audio_s} s of audio in ${end.frames} frames`;
}

/** The TTS panel: voice list, Speak and Stop. */
export class TtsPanel {
  constructor(elements, {onSignInNeeded}) {
    this.el = elements;
    this.onSignInNeeded = onSignInNeeded;
    this.session = null;
    this.available = false;
    this.el.speak.addEventListener("click", () => this.speak());
    this.el.stop.addEventListener("click", () => this.session && this.session.stop());
  }

  setAvailable(available, note) {
    this.available = available;
    if (!available) this.el.voice.disabled = true;
    this.el.note.innerHTML = "";
    if (note) this.el.note.append(note);
    this.refreshButtons();
  }

  /** Fill the voice select from GET /v1/voices; the default engine's default voice is selected. */
  setVoices(voices, defaults, defaultEngine) {
    const select = this.el.voice;
    const kept = select.value;  // the list is refreshed while engines load: keep the user's choice
    select.innerHTML = "";
    const engines = new Set(voices.map((v) => v.engine));
    for (const voice of voices) {
      const option = document.createElement("option");
      option.value = `${voice.engine}/${voice.id}`;
      option.dataset.engine = voice.engine;
      option.dataset.voice = voice.id;
      option.textContent = engines.size > 1 ? `${voice.name} (${voice.engine})` : voice.name;
      option.selected = voice.engine === defaultEngine && voice.id === defaults[defaultEngine];
      select.append(option);
    }
    if (kept && voices.some((v) => `${v.engine}/${v.id}` === kept)) select.value = kept;
    select.disabled = voices.length === 0;
  }

  refreshButtons() {
    const busy = this.session !== null;
    this.el.speak.disabled = !this.available || busy;
    this.el.stop.disabled = !busy;
  }

  async speak() {
    const text = this.el.text.value.trim();
    this.el.problem.textContent = "";
    if (!text) {
      this.el.problem.textContent = "Type some text to speak first.";
      this.el.text.focus();
      return;
    }
    const option = this.el.voice.selectedOptions[0];
    const params = {encoding: "pcm_f32le"};
    if (option) {
      params.engine = option.dataset.engine;
      params.voice = option.dataset.voice;
    }
    this.el.stats.textContent = "";
    const session = new TtsSession(this, text, params);
    this.session = session;
    this.refreshButtons();
    await session.run();
  }

  setState(text) {
    this.el.state.textContent = text;
  }

  ended(session, message, signIn) {
    if (this.session !== session) return;
    this.session = null;
    this.refreshButtons();
    if (message) this.el.problem.textContent = message;
    if (signIn) this.onSignInNeeded();
  }
}

/** One /v1/tts socket for one utterance, and the audio it scheduled. */
class TtsSession {
  constructor(panel, text, params) {
    this.panel = panel;
    this.text = text;
    this.params = params;
    this.reader = new F32Reader();
    this.sources = new Set();
    this.cursor = 0;
    this.frames = 0;
    this.done = false;
    this.cancelled = false;
    this.quietTimer = null;
  }

  async run() {
    try {
      this.ctx = await audioContext();
    } catch (err) {
      this.finish(`Audio output is not available: ${err.message || err}.`);
      return;
    }
    this.panel.setState("Connecting…");
    const ws = new WebSocket(socketUrl("/v1/tts", {...this.params, sample_rate: String(this.ctx.sampleRate)}));
    ws.binaryType = "arraybuffer";
    this.ws = ws;
    this.heard();
    ws.onmessage = (event) => {
      this.heard();
      if (typeof event.data === "string") {
        let msg;
        try { msg = JSON.parse(event.data); } catch { return; }
        this.onEvent(msg);
      } else {
        this.play(this.reader.push(event.data));
      }
    };
    ws.onclose = (event) => {
      const message = describeClose("Speech", event.code, event.reason);
      if (message) {
        this.finish(message, needsSignIn(event.code, event.reason));
        return;
      }
      // a normal end: the session stays stoppable until the scheduled audio has played
      this.whenPlayed(() => {
        if (!this.cancelled) this.panel.setState("Done.");
        this.finish("");
      });
    };
  }

  /** Reset the bounded wait for the next message. */
  heard() {
    clearTimeout(this.quietTimer);
    this.quietTimer = setTimeout(() => this.finish("The gateway stopped answering."), QUIET_TIMEOUT_MS);
  }

  send(msg) {
    if (this.ws && this.ws.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify(msg));
  }

  onEvent(msg) {
    const panel = this.panel;
    switch (msg.type) {
      case "ready":
        this.rate = msg.sample_rate;
        if (this.cancelled) {  // stopped before the socket was ready: nothing to speak
          this.send({type: "end"});
          break;
        }
        panel.setState(`Synthesizing with ${msg.engine} / ${msg.voice}…`);
        this.send({type: "speak", text: this.text, id: UTTERANCE_ID});
        break;
      case "start":
        panel.setState("Speaking…");
        break;
      case "end":
        panel.el.stats.textContent = describeStats(msg);
        this.send({type: "end"});
        break;
      case "cancelled":
        panel.setState(`Stopped after ${msg.frames_sent} frames.`);
        this.send({type: "end"});
        break;
      case "error":
        panel.el.problem.textContent = `${msg.message || "Error"} (${msg.code})`;
        this.send({type: "end"});  // nothing more will come for this utterance
        break;
      default:
        break;
    }
  }

  /** Schedule one frame right after the previous one. */
  play(samples) {
    if (this.cancelled || samples.length === 0) return;
    const ctx = this.ctx;
    const buffer = ctx.createBuffer(1, samples.length, this.rate || ctx.sampleRate);
    buffer.copyToChannel(samples, 0);
    const source = ctx.createBufferSource();
    source.buffer = buffer;
    source.connect(ctx.destination);
    if (this.cursor < ctx.currentTime) this.cursor = ctx.currentTime + START_LEAD_S;  // first frame, or an underrun
    source.start(this.cursor);
    this.cursor += buffer.duration;
    this.frames += 1;
    this.sources.add(source);
    source.onended = () => this.sources.delete(source);
  }

  whenPlayed(fn) {
    const left = Math.max(0, this.cursor - this.ctx.currentTime);
    setTimeout(fn, left * 1000);
  }

  /** Barge-in: silence now, ask the server to drop the rest. */
  stop() {
    if (this.cancelled) return;
    this.cancelled = true;
    for (const source of this.sources) source.stop();
    this.sources.clear();
    this.panel.setState("Stopping…");
    if (this.ws && this.ws.readyState === WebSocket.OPEN) this.send({type: "cancel"});
    else this.finish("");
  }

  finish(message, signIn = false) {
    if (this.done) return;
    this.done = true;
    clearTimeout(this.quietTimer);
    if (message) {
      for (const source of this.sources) source.stop();
      this.sources.clear();
    }
    if (this.ws && this.ws.readyState <= WebSocket.OPEN) this.ws.close();
    this.panel.ended(this, message, signIn);
  }
}
