// Audio on its way to the gateway, kept so that a dropped socket loses none of it.
//
// Outbox: what waits to be sent, in order: binary audio (s16le ArrayBuffers) and
// control messages. It fills while a socket connects or reconnects, or while the
// network is slow, and is bounded: past `maxS` seconds the oldest audio goes.
//
// SentBacklog: what was already sent in this dictation session, by its byte offset
// in the session's audio, from the end of the last `final` on. After a drop, a
// resumed session sends again what the gateway says it lacks (its
// `resume_audio_bytes`); a new session, when the gateway could not resume the old
// one, is sent all of it, so the utterance the drop cut is heard whole.
//
// StallWatch: whether a socket still hands what it buffers to the network. A
// browser cannot ping, so a path that went silent without a close shows only as a
// socket whose buffered data stops moving.

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

export class SentBacklog {
  /** `maxS`: the most audio kept; past it the oldest goes (a drop then cannot be resumed without a gap). */
  constructor(rate, maxS) {
    this.rate = rate;
    this.maxBytes = Math.round(rate * maxS) * 2;
    this.entries = [];  // {offset, item}, oldest first
    this.sent = 0;      // the session's audio bytes so far: the offset of the next item
    this.kept = 0;      // audio bytes in `entries`
    this.floor = 0;     // the oldest offset still kept
  }

  /** Record an item just sent: audio, or a control that must be sent again with it (finalize, end). */
  add(item) {
    this.entries.push({offset: this.sent, item});
    if (item.audio) {
      this.sent += item.audio.byteLength;
      this.kept += item.audio.byteLength;
    }
    while (this.kept > this.maxBytes && this.entries.length > 1) this.dropOldest();
  }

  /** A `final` ended at `endS` (seconds of the session's audio): the audio before it is settled. */
  settled(endS) {
    const end = Math.floor(endS * this.rate) * 2;
    while (this.entries.length && endOf(this.entries[0]) <= end && this.entries[0].offset < end) this.dropOldest();
  }

  dropOldest() {
    const {item} = this.entries.shift();
    if (item.audio) this.kept -= item.audio.byteLength;
    this.floor = this.entries.length ? this.entries[0].offset : this.sent;
  }

  /**
   * What to send again from byte `offset` on (oldest first, the first audio cut at
   * `offset`), and how many bytes before the oldest one kept are missing. The
   * backlog then starts over at `offset`: what is sent again is added again.
   */
  takeFrom(offset) {
    const start = Math.min(Math.max(offset, this.floor), this.sent);
    const items = [];
    for (const {offset: at, item} of this.entries) {
      if (!item.audio) {
        if (at >= start) items.push(item);
      } else if (at + item.audio.byteLength > start) {
        const skip = Math.max(0, start - at);
        items.push(skip ? {...item, audio: item.audio.slice(skip), at: item.at + skip / 2 / this.rate} : item);
      }
    }
    const missing = Math.max(0, this.floor - offset);
    this.startAt(Math.min(offset, this.sent));
    return {items, missing};
  }

  /** Everything kept, for a new session: the backlog starts over at 0. */
  takeAll() {
    const {items} = this.takeFrom(this.floor);
    this.startAt(0);
    return items;
  }

  /** Start over, empty, with the next item at byte `offset` (0 for a new session). */
  startAt(offset) {
    this.entries = [];
    this.kept = 0;
    this.sent = offset;
    this.floor = offset;
  }
}

function endOf({offset, item}) {
  return item.audio ? offset + item.audio.byteLength : offset;
}

export class StallWatch {
  /** `stallMs`: how long buffered data may stand still before the socket counts as stalled. */
  constructor(stallMs) {
    this.stallMs = stallMs;
    this.reset();
  }

  /** A new socket. */
  reset() {
    this.queuedBytes = 0;  // given to the socket's send()
    this.handed = 0;       // of those, handed to the network when last seen moving
    this.handedAt = performance.now();
  }

  queued(bytes) {
    this.queuedBytes += bytes;
  }

  /** True once the socket has held data (`bufferedAmount`) and handed none of it on for `stallMs`. */
  stalled(bufferedAmount) {
    const handed = this.queuedBytes - bufferedAmount;
    const now = performance.now();
    if (bufferedAmount === 0 || handed !== this.handed) {
      this.handed = handed;
      this.handedAt = now;
      return false;
    }
    return now - this.handedAt >= this.stallMs;
  }
}
