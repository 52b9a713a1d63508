// Audio on its way to the gateway, kept so that a dropped socket loses none of it.
//
// Outbox: what waits to be sent, in order: binary audio (s16le ArrayBuffers) and
// control messages. It fills while a socket connects or reconnects, or while the
// network is slow, and is bounded: past `maxS` seconds the oldest audio goes.
//
// ReplayWindow: audio already sent on the current socket that no `final` has
// settled yet. The gateway keeps an utterance's audio only within one socket, so
// after a drop this audio is queued again, ahead of the outbox, and the new
// socket hears the interrupted utterance from its start.

/** Items are {audio: ArrayBuffer, at: seconds into the dictated audio} or {control: object}. */
export class Outbox {
  constructor(rate, maxS) {
    this.items = [];
    this.samples = 0;
    this.maxSamples = Math.round(rate * maxS);
    this.droppedSamples = 0;
  }

  get length() { return this.items.length; }

  pushAudio(buffer, at) {
    this.items.push({audio: buffer, at});
    this.samples += buffer.byteLength / 2;
    this.trim();
  }

  pushControl(message) {
    this.items.push({control: message});
  }

  /** Put items back at the front (a replay), oldest first. */
  unshift(items) {
    this.items = items.concat(this.items);
    this.samples = this.items.reduce((n, item) => n + (item.audio ? item.audio.byteLength / 2 : 0), 0);
    this.trim();
  }

  shift() {
    const item = this.items.shift();
    if (item && item.audio) this.samples -= item.audio.byteLength / 2;
    return item;
  }

  clear() {
    this.items = [];
    this.samples = 0;
  }

  trim() {
    while (this.samples > this.maxSamples) {
      const index = this.items.findIndex((item) => item.audio);
      const [item] = this.items.splice(index, 1);
      this.samples -= item.audio.byteLength / 2;
      this.droppedSamples += item.audio.byteLength / 2;
    }
  }
}

export class ReplayWindow {
  /**
   * `maxS`: the most audio kept at all; `idleS`: what is kept while no utterance
   * is open (enough for the start of speech the gateway has not noticed yet).
   */
  constructor(rate, {maxS, idleS}) {
    this.rate = rate;
    this.maxSamples = Math.round(rate * maxS);
    this.idleSamples = Math.round(rate * idleS);
    this.reset();
  }

  reset() {
    this.entries = [];  // {at: sample offset on this socket's clock, item}
    this.sent = 0;
    this.open = false;
  }

  /** Record an item just sent on the socket. */
  add(item) {
    this.entries.push({at: this.sent, item});
    if (item.audio) this.sent += item.audio.byteLength / 2;
    this.trim();
  }

  speechStarted() {
    this.open = true;
  }

  /** A `final` ended at `endS` (seconds on this socket's audio clock): what came before is settled. */
  settled(endS) {
    const end = Math.round(endS * this.rate);
    this.entries = this.entries.filter(({at, item}) => (item.audio ? at + item.audio.byteLength / 2 : at) > end);
    this.open = false;
    this.trim();
  }

  /** Everything not settled, oldest first; the window starts over for a new socket. */
  takeAll() {
    const items = this.entries.map((entry) => entry.item);
    this.reset();
    return items;
  }

  trim() {
    const keep = this.open ? this.maxSamples : this.idleSamples;
    while (this.entries.length && this.sent - this.entries[0].at > keep) this.entries.shift();
  }
}
