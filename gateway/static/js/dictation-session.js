// One dictation run: the microphone, and the /v1/dictation socket it feeds,
// re-opened with backoff when it drops. The session is opened resumable: after a
// drop the page resumes it on the gateway with its token and the last event it
// applied, gets the events it missed once, and sends again the audio the gateway
// says it lacks. Where the gateway cannot resume it (the drop outlasted its grace,
// it restarted, it holds no session after a drop), a new session is opened and sent
// the audio no `final` has settled yet, so a drop loses no speech (within the
// bounds below). Audio captured while no socket is ready waits in a bounded outbox.
// Stop sends {"type":"end"} and waits (bounded) for `closed` and the close.

import {socketUrl} from "./api.js";
import {describeClose, isDrop, needsSignIn} from "./close-codes.js";
import {ResumePoint, isResumeRefusal, refusesResumable} from "./dictation-resume.js";
import {Microphone, levelOf, microphoneProblem} from "./mic.js";
import {Outbox, SentBacklog, StallWatch} from "./outbox.js";
import {floatToS16le} from "./pcm.js";
import {counters, logEvent} from "./stats.js";

const CHUNK_S = 0.05;             // 50 ms of audio per binary message
const READY_TIMEOUT_MS = 20000;   // each socket must say `ready` within this
const CLOSE_TIMEOUT_MS = 15000;   // after `end`, the final and the close must come within this
const MAX_SOCKET_BUFFER_S = 2;    // audio the socket may hold unsent; more waits in the outbox
const MAX_PENDING_S = 60;         // audio kept while disconnected
const STALL_MS = 5000;            // a socket that hands none of its buffered data to the network this long is dropped
const MAX_BACKLOG_S = 30;         // sent audio kept since the last final, to send again after a drop
const KEEPALIVE_MS = 10000;       // the gateway closes a socket idle for 30 s
const PUMP_RETRY_MS = 50;
const BACKOFF_MS = [500, 1000, 2000, 4000, 8000];
const MAX_RECONNECTS = 8;

export class DictationSession {
  /**
   * `view` is the panel; `forwarding` false holds audio back (push-to-talk not
   * pressed); `deviceId` picks the microphone ("" the default); `startS` is where
   * this session's audio starts on the transcript's clock.
   */
  constructor(view, {language, forwarding, deviceId, startS}) {
    this.view = view;
    this.language = language;
    this.forwarding = forwarding;
    this.startS = startS;
    this.mic = new Microphone((samples, rms) => this.onChunk(samples, rms), CHUNK_S, deviceId);
    this.forwardedSamples = 0;  // the dictated audio so far: the clock of the finals' times
    this.socketStartS = null;   // where the current socket's audio starts on that clock
    this.finalsShown = 0;
    this.opening = null;
    this.pressedAt = 0;
    this.ws = null;
    this.ready = false;
    this.everReady = false;
    this.stopping = false;
    this.done = false;
    this.attempt = 0;
    this.presses = 0;
    this.timers = new Set();
    this.lastSentAt = 0;
    this.watch = new StallWatch(STALL_MS);
    this.resume = new ResumePoint();
    this.refusal = null;        // the code of the gateway's refusal to resume, on the current socket
    this.collected = null;      // bytes an ended session had received, from its `ready` on a resume
    this.renewal = null;        // why the current socket opened a new session after a refused resume
  }

  async run() {
    this.view.setState("Opening the microphone…");
    try {
      await this.mic.open();
    } catch (err) {
      this.finish(microphoneProblem(err));
      return;
    }
    if (this.stopping) { this.finish(""); return; }
    this.rate = this.mic.rate;
    this.outbox = new Outbox(this.rate, MAX_PENDING_S);
    this.backlog = new SentBacklog(this.rate, MAX_BACKLOG_S);
    this.keepaliveTimer = setInterval(() => this.keepAlive(), KEEPALIVE_MS);
    this.view.sessionLive();
    this.view.setState("Connecting…");
    this.connect();
    if (!this.forwarding && this.view.releasesMicrophone) this.mic.close();  // opened only to learn the rate
  }

  connect() {
    const resuming = this.resume.token !== null;
    const ws = new WebSocket(socketUrl("/v1/dictation", resuming ? this.resume.query : this.sessionQuery()));
    ws.binaryType = "arraybuffer";
    this.ws = ws;
    this.ready = false;
    this.watch.reset();
    this.refusal = null;
    this.collected = null;
    if (!resuming) this.socketStartS = null;  // a resumed session's clock goes on
    this.later(READY_TIMEOUT_MS, () => {
      if (this.ws === ws && !this.ready) this.lost(ws, "The gateway did not start the dictation session in time.");
    });
    ws.onmessage = (event) => {
      if (this.ws !== ws || typeof event.data !== "string") return;
      let msg;
      try { msg = JSON.parse(event.data); } catch { return; }
      this.onEvent(msg);
    };
    ws.onclose = (event) => {
      if (this.ws !== ws || this.done) return;
      const resumable = this.everReady && this.resume.token !== null && isDrop(event.code);
      if (this.refusal) {
        this.renew(ws, this.refusal);
      } else if (!this.everReady && this.resume.offered && refusesResumable(event.code, event.reason)) {
        this.resume.offered = false;  // this gateway holds no session after a drop: open a plain one
        this.connect();
      } else if (this.stopping && !resumable) {
        // a socket the user stopped before it was up closes without a code: nothing to explain
        const quiet = event.code === 1005 || event.code === 1006;
        this.finish(quiet ? "" : describeClose("Dictation", event.code, event.reason));
      } else if (this.everReady && isDrop(event.code)) {
        this.lost(ws, "");
      } else {
        this.finish(describeClose("Dictation", event.code, event.reason), needsSignIn(event.code, event.reason));
      }
    };
  }

  sessionQuery() {
    const params = {sample_rate: String(this.rate), encoding: "pcm_s16le"};
    if (this.language) params.language = this.language;
    if (this.resume.offered) params.resumable = "true";
    return params;
  }

  /** Let go of a socket: nothing it still says counts. */
  drop(ws) {
    ws.onclose = null;
    ws.onmessage = null;
    if (ws.readyState <= WebSocket.OPEN) ws.close();
    this.ws = null;
    this.ready = false;
  }

  /** The socket is gone (or useless): reconnect if it ever worked, else give up with `message`. */
  lost(ws, message) {
    this.drop(ws);
    if (!this.everReady) { this.finish(message); return; }
    if (this.attempt >= MAX_RECONNECTS) {
      this.finish(`Lost the connection to the gateway; ${MAX_RECONNECTS} attempts to reconnect failed.`);
      return;
    }
    const delay = BACKOFF_MS[Math.min(this.attempt, BACKOFF_MS.length - 1)];
    this.attempt += 1;
    if (this.resume.token === null) this.sendAgain(this.backlog.takeAll(), true);
    this.view.reconnecting(delay, this.attempt, MAX_RECONNECTS);
    logEvent("dictation:dropped");
    this.later(delay, () => {
      if (this.done) return;
      this.view.setState("Reconnecting…");
      this.connect();
    });
  }

  /**
   * The gateway could not resume the session (`code`): go on in a new one, sent the
   * audio the old one had not received (an ended session says how much it had), or
   * else all the audio no final has settled. The transcript so far stays.
   */
  renew(ws, code) {
    this.drop(ws);
    const items = this.collected === null ? this.backlog.takeAll() : this.backlog.takeFrom(this.collected).items;
    this.backlog.startAt(0);
    this.resume.forget();
    this.sendAgain(items, true);
    this.renewal = code;
    logEvent("dictation:resume-refused");
    this.view.setState("Reconnecting…");
    this.connect();
  }

  /** Put what was sent before the drop first in line again; a new session decodes afresh, so the partial goes. */
  sendAgain(items, newSession) {
    this.outbox.unshift(items.map((item) => ({...item, replayed: true})));
    if (newSession) this.view.clearPartial();
  }

  /** A resumed session: send again what the gateway says it lacks. */
  resumed(ready) {
    this.resume.resumed(ready);
    const {items, missing} = this.backlog.takeFrom(Number(ready.resume_audio_bytes) || 0);
    this.sendAgain(items, false);
    counters.resumes += 1;
    logEvent("dictation:resumed");
    const lostS = (missing / 2 / this.rate).toFixed(1);
    if (missing) this.view.showProblem(`${lostS} s of audio from before the drop was no longer kept to send again.`);
  }

  onReady(msg) {
    if (msg.ended) {  // the session ended while the page was away: its last events, then how it ended
      this.collected = Number(msg.resume_audio_bytes) || 0;
      return;
    }
    this.ready = true;
    if (msg.resumed) this.resumed(msg);
    else this.resume.started(msg);
    if (this.everReady) counters.reconnects += 1;
    if (this.everReady && !msg.resumed) logEvent("dictation:reconnected");
    if (this.stopping) this.view.setState("Finishing the last sentence…");  // a drop after Stop, resumed
    else if (this.renewal) this.view.renewed(this.renewal);
    else this.view.listening(msg.model || "ASR", this.rate, this.everReady);
    this.renewal = null;
    this.everReady = true;
    this.attempt = 0;
    this.pump();
  }

  onEvent(msg) {
    const view = this.view;
    if (this.resume.seen(msg)) return;  // given again by a resume: applied once
    switch (msg.type) {
      case "ready":
        this.onReady(msg);
        break;
      case "speech_started":
        view.hearingSpeech();
        break;
      case "partial":
        view.showPartial(String(msg.text || ""), String(msg.stable || ""));
        view.showLag(Number(msg.lag_s) || 0);
        break;
      case "final": {
        this.backlog.settled(Number(msg.end) || 0);
        logEvent("dictation:final");
        const offset = this.startS + (this.socketStartS ?? 0);
        if (view.addFinal(String(msg.text || ""), offset + (Number(msg.start) || 0), offset + (Number(msg.end) || 0))) {
          this.finalsShown += 1;  // every final shown counts, whichever socket it came on
        }
        if (!this.stopping) view.listening(null, this.rate, false);
        break;
      }
      case "error":
        if (isResumeRefusal(msg.code)) {
          this.refusal = msg.code;  // the close follows: a new session then
          break;
        }
        view.showProblem(`${msg.message || "Error"} (${msg.code})${msg.retryable ? " — retrying, nothing is lost." : ""}`);
        break;
      case "closed":
        this.sawClosed = true;
        view.setState(doneSummary(this.finalsShown, this.forwardedSamples / this.rate));
        break;
      default:
        break;
    }
  }

  onChunk(samples, rms) {
    counters.micChunks += 1;
    counters.levelUpdates += 1;
    if (this.pressedAt) {
      counters.micStartMs = performance.now() - this.pressedAt;
      logEvent("dictation:microphone-reopened");
      this.view.microphoneStarted(counters.micStartMs);
      this.pressedAt = 0;
    }
    this.view.setLevel(levelOf(rms));
    if (!this.outbox || !this.forwarding || this.done) return;
    const dropped = this.outbox.droppedSamples;
    this.outbox.pushAudio(floatToS16le(samples), this.forwardedSamples / this.rate);
    this.forwardedSamples += samples.length;
    if (this.outbox.droppedSamples !== dropped) {
      counters.droppedAudioS = this.outbox.droppedSamples / this.rate;
      this.view.showProblem(`The connection is down too long: ${counters.droppedAudioS.toFixed(1)} s of audio could not be kept.`);
    }
    this.pump();
  }

  /** Send what waits, as far as the socket's own buffer allows; a stalled socket counts as dropped. */
  pump() {
    const ws = this.ws;
    if (!ws || !this.ready || ws.readyState !== WebSocket.OPEN) return;
    if (this.watch.stalled(ws.bufferedAmount)) {
      logEvent("dictation:stalled");
      this.lost(ws, "");
      return;
    }
    while (this.outbox.length && ws.bufferedAmount < this.rate * 2 * MAX_SOCKET_BUFFER_S) {
      const item = this.outbox.shift();
      if (item.audio) {
        if (this.socketStartS === null) this.socketStartS = item.at;
        this.send(ws, item.audio);
        counters.audioChunksSent += 1;
        if (item.replayed) counters.replayedChunks += 1;
      } else {
        this.send(ws, JSON.stringify(item.control));
        if (item.control.type === "finalize") counters.finalizeSent += 1;
      }
      this.backlog.add(item);  // a finalize or end is sent again with the audio around it
      this.lastSentAt = performance.now();
    }
    if (this.outbox.length && !this.pumpTimer) {
      this.pumpTimer = setTimeout(() => { this.pumpTimer = null; this.pump(); }, PUMP_RETRY_MS);
    }
  }

  send(ws, message) {
    ws.send(message);
    this.watch.queued(typeof message === "string" ? message.length : message.byteLength);  // JSON here is ASCII
  }

  keepAlive() {
    const ws = this.ws;
    if (!ws || !this.ready || ws.readyState !== WebSocket.OPEN) return;
    if (performance.now() - this.lastSentAt < KEEPALIVE_MS) return;
    this.send(ws, JSON.stringify({type: "keepalive"}));
    this.lastSentAt = performance.now();
  }

  /** Push-to-talk pressed: audio flows to the gateway from now on (the microphone reopened if released). */
  press() {
    this.presses += 1;
    this.forwarding = true;
    if (this.outbox && !this.mic.isOpen && !this.opening && !this.stopping && !this.done) {
      this.opening = this.reopen();
    }
  }

  async reopen() {
    this.pressedAt = performance.now();
    try {
      await this.mic.open();
      if (this.done || this.stopping) this.mic.close();  // stopped while it opened
    } catch (err) {
      this.finish(microphoneProblem(err));
    } finally {
      this.opening = null;
    }
  }

  /** Push-to-talk released: the audio captured up to now, then `finalize`; the microphone closed if asked. */
  async release() {
    const press = this.presses;
    if (this.opening) await this.opening;
    await this.mic.flush();
    if (press !== this.presses || this.done || this.stopping) return;  // pressed again meanwhile: one utterance
    this.forwarding = false;
    if (!this.outbox) return;
    this.outbox.pushControl({type: "finalize"});
    this.pump();
    if (this.view.releasesMicrophone) {
      this.mic.close();
      this.view.setLevel(0);
    }
  }

  /** Stop: the last audio, then `end`; close when the gateway has answered. */
  async stop() {
    if (this.stopping || this.done) return;
    this.stopping = true;
    this.view.stopping();
    if (!this.ready) {
      // Not connected yet, or reconnecting: nothing more will be heard.
      this.mic.close();
      const ws = this.ws;
      if (ws && ws.readyState === WebSocket.OPEN) {
        ws.send(JSON.stringify({type: "end"}));
        this.later(CLOSE_TIMEOUT_MS, () => this.finish("The gateway did not finish in time; the connection was closed."));
      } else {
        this.finish(this.everReady ? "Stopped while reconnecting: the audio since the connection was lost was not transcribed." : "");
      }
      return;
    }
    this.view.setState("Finishing the last sentence…");
    await this.mic.flush();
    this.forwarding = false;
    this.mic.close();
    if (this.done) return;
    this.outbox.pushControl({type: "end"});
    this.pump();
    this.later(CLOSE_TIMEOUT_MS, () => this.finish("The gateway did not finish in time; the connection was closed."));
  }

  later(ms, fn) {
    const timer = setTimeout(() => { this.timers.delete(timer); fn(); }, ms);
    this.timers.add(timer);
  }

  finish(message, signIn = false) {
    if (this.done) return;
    this.done = true;
    for (const timer of this.timers) clearTimeout(timer);
    this.timers.clear();
    clearInterval(this.keepaliveTimer);
    clearTimeout(this.pumpTimer);
    this.mic.close();
    if (this.ws && this.ws.readyState <= WebSocket.OPEN) this.ws.close();
    this.view.ended(this, message, signIn);
  }
}

function doneSummary(finals, audioS) {
  return `Done: ${finals} utterance${finals === 1 ? "" : "s"}, ${audioS.toFixed(1)} s of audio.`;
}
