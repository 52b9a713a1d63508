// The speech panel: engine and voice pickers, the text, Speak and Stop, the time
// to first audio as soon as it is known and the server's numbers at the end.
// One TtsSession (tts-session.js) per Speak.

import {fileStem, saveBlob} from "./transcript-export.js";
import {TtsSession} from "./tts-session.js";
import {VoicePicker} from "./voices.js";

/** The end-of-utterance numbers in words: how long, how soon, how fast. */
export function describeStats(end) {
  const ttfa = Number(end.ttfa_ms).toFixed(0);
  const rtf = Number(end.rtf);
  const speed = rtf > 0 && rtf < 1 ? `made ${(1 / rtf).toFixed(1)}× faster than it plays`
    : `made at ${rtf.toFixed(1)}× its playing time`;
  return `${Number(end.audio_s).toFixed(1)} s of speech · the gateway's first audio after ${ttfa} ms · ${speed}`;
}

export class TtsPanel {
  constructor(el, {onSignInNeeded}) {
    this.el = el;
    this.onSignInNeeded = onSignInNeeded;
    this.session = null;
    this.available = false;
    this.voices = new VoicePicker(el.picker, {onChange: () => this.refreshButtons()});
    el.speak.addEventListener("click", () => this.speak());
    el.stop.addEventListener("click", () => this.session && this.session.stop());
    el.download.addEventListener("click", () => this.download());
    this.spoken = null;
  }

  voiceName(engine, voice) {
    return this.voices.nameOf(engine, voice);
  }

  download() {
    if (this.spoken && this.spoken.samples) saveBlob(this.spoken.toWav(), `${fileStem("speech")}.wav`);
  }

  setAvailable(available, note) {
    this.available = available;
    this.el.note.replaceChildren();
    if (note) this.el.note.append(note);
    this.refreshButtons();
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
    this.el.ttfa.textContent = "";
    this.el.stats.textContent = "";
    this.spoken = null;
    this.el.download.hidden = true;
    const session = new TtsSession(this, text, {encoding: "pcm_f32le", ...this.voices.selection()});
    this.session = session;
    this.refreshButtons();
    await session.run();
  }

  // ---- what the session reports

  setState(text) {
    this.el.state.textContent = text;
  }

  showFirstAudio(ms) {
    this.el.ttfa.textContent = `First audio after ${Math.round(ms)} ms`;
  }

  showStats(end) {
    this.el.stats.textContent = describeStats(end);
  }

  showProblem(text) {
    this.el.problem.textContent = text;
  }

  ended(session, message, signIn) {
    if (this.session !== session) return;
    this.session = null;
    this.refreshButtons();
    this.spoken = session.spoken;
    this.el.download.hidden = session.spoken.samples === 0;
    this.el.download.textContent = session.spoken.truncated
      ? "Download the first 10 minutes (WAV)" : "Download the speech (WAV)";
    if (message) this.el.problem.textContent = message;
    if (signIn) this.onSignInNeeded();
  }
}
