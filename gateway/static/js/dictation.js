// The dictation panel: Start/Stop, hands-free or push-to-talk (a hold button, or
// the space bar), the language picker, the level meter, and what the session
// says. One DictationSession at a time (dictation-session.js).

import {DictationSession} from "./dictation-session.js";
import {whyNotResumed} from "./dictation-resume.js";
import {ElapsedClock} from "./elapsed.js";
import {MicPicker} from "./mic-picker.js";
import {Transcript} from "./transcript.js";
import {ScreenAwake} from "./wake-lock.js";

const LAG_SHOWN_S = 1.0;  // the recognizer is shown as behind from this lag on
const NOTICE_MS = 10000;  // a notice in the status line outlasts "Hearing speech…" and the like this long

/** "German (de)" for a language code, where the browser knows its name. */
function languageName(code) {
  try {
    const name = new Intl.DisplayNames([navigator.language || "en"], {type: "language"}).of(code);
    return name && name !== code ? `${name} (${code})` : code;
  } catch {
    return code;
  }
}

/** Shown before Start on a page the browser will not give a microphone to (plain http off this machine). */
function insecurePageNote() {
  const note = document.createDocumentFragment();
  const https = `https://${location.host}${location.pathname}`;
  const link = document.createElement("a");
  link.href = https;
  link.textContent = https;
  note.append("The microphone needs a secure page, and this one is plain http. Open the gateway over https: ",
    "ask its owner for the share link (it starts with https://, and the QR code in the owner's admin panel opens it), or try ",
    link, ". On the gateway's own machine, http://localhost works too.");
  return note;
}

/** True when the space bar belongs to the focused control (typing, choosing, pressing it). */
function spaceIsTaken(target) {
  if (!(target instanceof Element)) return false;
  if (target.id === "dictation-talk") return false;
  return Boolean(target.closest("input, textarea, select, button, summary, a[href], [contenteditable]"));
}

export class DictationPanel {
  constructor(el, {onSignInNeeded}) {
    this.el = el;
    this.onSignInNeeded = onSignInNeeded;
    this.session = null;
    this.available = false;
    this.talking = false;
    this.noticeTimer = null;
    this.afterNotice = null;  // the passing state a notice holds back, shown when it ends
    this.transcript = new Transcript(el.transcript);
    this.mics = new MicPicker(el.mic);
    this.clock = new ElapsedClock(el.elapsed);
    this.awake = new ScreenAwake();
    this.secure = window.isSecureContext;
    if (!this.secure) {
      el.secure.replaceChildren(insecurePageNote());
      el.secure.hidden = false;
    }
    el.toggle.addEventListener("click", () => this.toggle());
    for (const radio of el.modes) radio.addEventListener("change", () => this.modeChanged());
    this.wireTalkButton();
    this.modeChanged();
  }

  get pushToTalk() {
    return this.el.modes.some((radio) => radio.checked && radio.value === "push");
  }

  /** Push-to-talk that gives the microphone back between presses (it reopens on the next press). */
  get releasesMicrophone() {
    return this.pushToTalk && this.el.release.checked;
  }

  wireTalkButton() {
    const talk = this.el.talk;
    talk.addEventListener("pointerdown", (event) => {
      if (event.button !== 0) return;
      talk.setPointerCapture(event.pointerId);
      this.pressTalk();
    });
    for (const name of ["pointerup", "pointercancel", "lostpointercapture"]) {
      talk.addEventListener(name, () => this.releaseTalk());
    }
    talk.addEventListener("contextmenu", (event) => event.preventDefault());  // a long touch is a hold
    document.addEventListener("keydown", (event) => {
      if (event.code !== "Space" || !this.pushToTalk || this.el.talk.disabled || spaceIsTaken(event.target)) return;
      event.preventDefault();
      if (!event.repeat) this.pressTalk();
    });
    document.addEventListener("keyup", (event) => {
      if (event.code !== "Space" || !this.talking) return;
      event.preventDefault();
      this.releaseTalk();
    });
    window.addEventListener("blur", () => this.releaseTalk());  // a key released elsewhere never comes back
  }

  /** Enable or disable Start, with the engine note that explains why. */
  setAvailable(available, note) {
    this.available = available && this.secure;
    this.el.note.replaceChildren();
    if (note) this.el.note.append(note);
    this.refreshControls();
  }

  /** Offer the languages of a multilingual model; hide the picker otherwise. */
  setLanguages(codes) {
    const select = this.el.language;
    const kept = select.value;
    select.replaceChildren(new Option("Detect automatically", ""));
    for (const code of codes) select.append(new Option(languageName(code), code));
    if (codes.includes(kept)) select.value = kept;
    this.el.languageField.hidden = codes.length === 0;
  }

  modeChanged() {
    const push = this.pushToTalk;
    this.el.talk.hidden = !push;
    this.el.pushHint.hidden = !push;
    this.el.releaseField.hidden = !push;
    if (this.session && !push) this.session.press();  // hands-free: everything flows
    if (this.session && push && !this.talking) this.session.release();
    this.refreshControls();
  }

  refreshControls() {
    const live = this.session !== null;
    this.el.toggle.textContent = live ? "Stop dictation" : "Start dictation";
    this.el.toggle.dataset.live = live ? "true" : "false";  // the label says the state; styling only
    if (!live) this.el.toggle.disabled = !this.available;
    this.el.talk.disabled = !this.available || (live && this.session.stopping);
    this.el.language.disabled = live;  // a socket's language is fixed when it opens
    this.mics.setDisabled(live);
  }

  toggle() {
    if (this.session) this.session.stop();
    else this.start();
  }

  start() {
    this.el.problem.textContent = "";
    this.showLag(0);
    const session = new DictationSession(this, {
      language: this.el.language.value, forwarding: !this.pushToTalk || this.talking,
      deviceId: this.mics.deviceId, startS: this.transcript.endS,
    });
    this.session = session;
    this.clock.start();
    this.awake.start();
    this.el.toggle.disabled = true;  // until the microphone is open
    this.refreshControls();
    session.run();
  }

  pressTalk() {
    if (this.talking) return;
    this.talking = true;
    this.el.talk.setAttribute("aria-pressed", "true");  // the name stays, so assistive tech hears one control
    if (!this.session) this.start();
    this.session.press();
  }

  releaseTalk() {
    if (!this.talking) return;
    this.talking = false;
    this.el.talk.setAttribute("aria-pressed", "false");
    if (this.session) this.session.release();
  }

  // ---- what the session reports

  sessionLive() {
    this.el.toggle.disabled = false;  // Stop works while the socket is still connecting
    this.mics.refresh();  // the devices have names once the microphone is allowed
  }

  get speakHint() {
    return this.pushToTalk ? "Hold to talk (or the space bar)." : "Speak now.";
  }

  listening(model, rate, reconnected) {
    if (reconnected) this.setState(`Reconnected. ${this.speakHint}`);
    else if (model) this.setState(`Listening (${model}, ${rate} Hz). ${this.speakHint}`);
    else this.passingState(`Listening. ${this.speakHint}`);
  }

  hearingSpeech() {
    this.passingState("Hearing speech…");
  }

  /** A new session after the gateway could not resume the old one (`code`, its refusal): a notice. */
  renewed(code) {
    this.setState(`Reconnected in a new session: the old one could not be resumed (${whyNotResumed(code)}). `
      + `The text so far is kept. ${this.speakHint}`);
    this.afterNotice = null;
    this.noticeTimer = setTimeout(() => {
      this.noticeTimer = null;
      if (this.afterNotice !== null) this.setState(this.afterNotice);
    }, NOTICE_MS);
  }

  /** A state that a notice still on the status line holds back. */
  passingState(text) {
    if (this.noticeTimer === null) this.setState(text);
    else this.afterNotice = text;
  }

  reconnecting(delayMs, attempt, maxAttempts) {
    this.setState(`Connection lost. Reconnecting in ${delayMs / 1000} s (attempt ${attempt} of ${maxAttempts}); your audio is kept.`);
  }

  stopping() {
    this.el.toggle.disabled = true;
    this.refreshControls();
  }

  /** What releasing the microphone cost this time: the wait for it to start again. */
  microphoneStarted(ms) {
    this.el.releaseHint.textContent = "The recording indicator goes off between presses. Each press then waits for "
      + `the microphone to start (the last one: ${Math.round(ms)} ms), and speech in that moment is not heard.`;
  }

  setState(text) {
    clearTimeout(this.noticeTimer);  // a state that matters replaces a notice
    this.noticeTimer = null;
    this.el.state.textContent = text;
  }

  setLevel(level) {
    this.el.level.value = level;
  }

  showLag(lagS) {
    this.el.lag.textContent = lagS >= LAG_SHOWN_S ? `The recognizer is ${lagS.toFixed(1)} s behind.` : "";
  }

  showPartial(text, stable) { this.transcript.showPartial(text, stable); }

  clearPartial() { this.transcript.clearPartial(); }

  addFinal(text, start, end) { return this.transcript.addFinal(text, start, end); }

  showProblem(text) {
    this.el.problem.textContent = text;
  }

  ended(session, message, signIn) {
    if (this.session !== session) return;
    this.session = null;
    this.clock.stop();
    this.awake.stop();
    this.setLevel(0);
    this.showLag(0);
    this.refreshControls();
    if (message) this.setState("");
    else if (!session.sawClosed) this.setState("Stopped.");
    if (message) this.showProblem(message);
    if (signIn) this.onSignInNeeded();
  }
}
