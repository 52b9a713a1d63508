// Counters of what the page did with audio, readable as window.voxgate by tests
// and by anyone curious in the developer console. Nothing reads them back.

export const counters = {
  micChunks: 0,          // chunks the capture worklet delivered
  levelUpdates: 0,       // level meter updates
  audioChunksSent: 0,    // binary messages sent on dictation sockets (replays included)
  replayedChunks: 0,     // of those, sent again after a reconnect (what the gateway lacked)
  finalizeSent: 0,       // push-to-talk releases that reached a socket
  reconnects: 0,         // dictation sockets re-opened after a drop
  resumes: 0,            // of those, the gateway resumed the session (else a new one started)
  droppedAudioS: 0,      // audio that could not be kept while disconnected
  micStartMs: 0,         // push-to-talk with the microphone released: press to its first audio, last time
  ttsFramesReceived: 0,  // binary frames from /v1/tts
  ttsFramesScheduled: 0, // frames given to the audio context
  ttsFramesPlayed: 0,    // frames that played to their end
  ttsFramesStopped: 0,   // frames cut off by Stop
};

const MAX_EVENTS = 200;
const events = [];

/** Remember a notable moment ("dictation:ready", ...) in a short, bounded log. */
export function logEvent(name) {
  events.push(name);
  if (events.length > MAX_EVENTS) events.shift();
}

window.voxgate = {counters, events};
