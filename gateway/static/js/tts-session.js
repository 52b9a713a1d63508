// One /v1/tts socket for one utterance: text in, pcm_f32le frames out to the
// player. Stop sends {"type":"cancel"} and silences the page at once. The time
// to first audio is measured here, from `speak` to the first frame.

import {socketUrl} from "./api.js";
import {describeClose, needsSignIn} from "./close-codes.js";
import {F32Reader, audioContext} from "./pcm.js";
import {FramePlayer} from "./player.js";
import {counters} from "./stats.js";
import {SpokenAudio} from "./wav.js";

const QUIET_TIMEOUT_MS = 30000;  // a socket that says nothing for this long is given up
const UTTERANCE_ID = "page-1";

export class TtsSession {
  constructor(view, text, params) {
    this.view = view;
    this.text = text;
    this.params = params;
    this.reader = new F32Reader();
    this.done = false;
    this.cancelled = false;
    this.quietTimer = null;
    this.spokeAt = 0;
    this.frames = 0;
    this.spoken = new SpokenAudio();
  }

  async run() {
    try {
      this.ctx = await audioContext();
    } catch (err) {
      this.finish(`Audio output is not available: ${err.message || err}.`);
      return;
    }
    if (this.done) return;  // stopped while the audio context was starting
    this.player = new FramePlayer(this.ctx);
    this.view.setState("Connecting…");
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
        this.onFrame(event.data);
      }
    };
    ws.onclose = (event) => {
      const message = describeClose("Speech", event.code, event.reason);
      if (message) {
        this.finish(message, needsSignIn(event.code, event.reason));
        return;
      }
      // a normal end: the session stays stoppable until the scheduled audio has played
      // (nothing is left to play after Stop, so that ends at once)
      this.player.whenPlayed(() => {
        if (!this.cancelled) this.view.setState("Done.");
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
    const view = this.view;
    switch (msg.type) {
      case "ready":
        this.rate = msg.sample_rate;
        if (this.cancelled) {  // stopped before the socket was ready: nothing to speak
          this.send({type: "end"});
          break;
        }
        view.setState(`Preparing the speech (${view.voiceName(msg.engine, msg.voice)})…`);
        this.spokeAt = performance.now();
        this.send({type: "speak", text: this.text, id: UTTERANCE_ID});
        break;
      case "start":
        view.setState("Speaking…");
        break;
      case "end":
        this.synthesized = true;  // all of it is here; only the playing is left
        view.showStats(msg);
        this.send({type: "end"});
        break;
      case "cancelled":
        view.setState("Stopped.");
        this.send({type: "end"});
        break;
      case "error":
        view.showProblem(`${msg.message || "Error"} (${msg.code})`);
        this.send({type: "end"});  // nothing more will come for this utterance
        break;
      default:
        break;
    }
  }

  onFrame(data) {
    counters.ttsFramesReceived += 1;
    this.frames += 1;
    if (this.frames === 1 && this.spokeAt) this.view.showFirstAudio(performance.now() - this.spokeAt);
    const samples = this.reader.push(data);
    const rate = this.rate || this.ctx.sampleRate;
    this.spoken.add(samples, rate);
    this.player.play(samples, rate);
  }

  /** Barge-in: silence now, ask the server to drop the rest (if it is still making any). */
  stop() {
    if (this.cancelled) return;
    this.cancelled = true;
    if (this.player) this.player.stop();
    if (this.ws && this.ws.readyState === WebSocket.OPEN && !this.synthesized) {
      this.view.setState("Stopping…");
      this.send({type: "cancel"});
    } else {
      this.view.setState("Stopped.");
      this.finish("");
    }
  }

  finish(message, signIn = false) {
    if (this.done) return;
    this.done = true;
    clearTimeout(this.quietTimer);
    if (message && this.player) this.player.stop();
    if (this.ws && this.ws.readyState <= WebSocket.OPEN) this.ws.close();
    this.view.ended(this, message, signIn);
  }
}
