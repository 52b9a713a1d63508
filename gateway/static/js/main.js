// Page start-up: ask the gateway what this browser may do (GET /v1/engines) and
// who it is (GET /v1/auth/me), show the matching login gate or the panels, and
// keep the engine notes fresh while an engine is still loading.

import {AdminPanel} from "./admin.js";
import {request} from "./api.js";
import {DictationPanel} from "./dictation.js";
import {panelStates} from "./engines.js";
import {decide, signInError, signInWithKey, signInWithPin, signOut, takePinFromAddress, whoAmI} from "./gate.js";
import "./stats.js";
import {TtsPanel} from "./tts.js";

const LOADING_POLL_MS = 2000;
const MAX_LOADING_POLLS = 300;   // ten minutes of model loading, then the page stops asking
const UNREACHABLE_RETRY_MS = 5000;
const MAX_UNREACHABLE_RETRIES = 60;
const WHO = {
  loopback: "This computer",
  api_key: "Signed in with the API key",
  session: "Signed in with the API key",
  pin: "Signed in with the PIN",
  pin_session: "Signed in with the PIN",
  ticket: "Signed in with a ticket",
  trusted_network: "Trusted network",
  anonymous: "Open gateway",
};

const $ = (id) => document.getElementById(id);

const gate = {
  section: $("gate"), message: $("gate-message"),
  pinForm: $("pin-form"), pinInput: $("pin-input"), pinError: $("pin-error"),
  keyForm: $("key-form"), keyInput: $("key-input"), keyError: $("key-error"),
};
const app = $("app");
const signOutButton = $("sign-out");
const who = $("who");

const dictation = new DictationPanel({
  toggle: $("dictation-toggle"), talk: $("dictation-talk"), pushHint: $("push-hint"),
  modes: [...document.querySelectorAll("input[name=dictation-mode]")],
  language: $("dictation-language"), languageField: $("language-field"), level: $("mic-level"),
  state: $("dictation-state"), lag: $("dictation-lag"), note: $("asr-note"), problem: $("dictation-problem"),
  secure: $("dictation-secure"), mic: $("mic-device"), release: $("release-mic"), releaseField: $("release-field"),
  releaseHint: $("release-hint"),
  elapsed: $("dictation-elapsed"),
  transcript: {
    finals: $("finals"), partialStable: document.querySelector("#partial .stable"),
    partialUnstable: document.querySelector("#partial .unstable"),
    copy: $("transcript-copy"), clear: $("transcript-clear"), undo: $("transcript-undo"),
    download: $("transcript-download"), format: $("transcript-format"), status: $("transcript-status"),
  },
}, {onSignInNeeded: () => enter()});

const tts = new TtsPanel({
  text: $("tts-text"), speak: $("tts-speak"), stop: $("tts-stop"), state: $("tts-state"),
  ttfa: $("tts-ttfa"), stats: $("tts-stats"), note: $("tts-note"), problem: $("tts-problem"),
  download: $("tts-download"),
  picker: {
    engine: $("tts-engine"), voice: $("tts-voice"), voiceId: $("tts-voice-id"),
    clone: {details: $("clone"), form: $("clone-form"), id: $("clone-id"), file: $("clone-file"),
            submit: $("clone-submit"), status: $("clone-status")},
  },
}, {onSignInNeeded: () => enter()});

const admin = new AdminPanel({
  section: $("admin"),
  share: {toggle: $("share-toggle"), details: $("share-details"), pin: $("share-pin"), link: $("share-link"),
          qr: $("share-qr"), status: $("share-status"), tls: $("share-tls"), fingerprint: $("share-fingerprint")},
  sessions: {body: $("sessions-body"), status: $("sessions-status"), refresh: $("sessions-refresh")},
});

let pendingPin = takePinFromAddress();
let timer = null;
let loadingPolls = 0;
let unreachableRetries = 0;
let shownAdmin = null;

function schedule(fn, ms) {
  clearTimeout(timer);
  timer = setTimeout(fn, ms);
}

/** Decide what to show from GET /v1/engines; the single entry point after any sign-in change. */
async function enter() {
  clearTimeout(timer);
  const result = await request("GET", "/v1/engines");
  const decision = decide(result);
  if (decision.view === "open") {
    unreachableRetries = 0;
    await showApp(result.body.engines || []);
    return;
  }
  showGate(decision);
  if (decision.view === "pin" && pendingPin) {
    const pin = pendingPin;
    pendingPin = "";  // used once: a wrong PIN from a link must not be retried forever
    gate.pinInput.value = pin;
    await submitPin(pin);
  }
}

async function showApp(engines) {
  const me = await whoAmI();
  gate.section.hidden = true;
  app.hidden = false;
  signOutButton.hidden = !me.session;  // only a session can be signed out of
  who.textContent = (WHO[me.principal] || "") + (me.admin ? " · admin" : "");
  if (shownAdmin !== me.admin) {
    shownAdmin = me.admin;
    admin.show(me.admin);
    tts.voices.setAdmin(me.admin);
  }
  const states = panelStates(engines, me.admin);
  dictation.setAvailable(states.asr.available, states.asr.note);
  dictation.setLanguages(states.asr.languages);
  tts.setAvailable(states.tts.available, states.tts.note);
  tts.voices.setEngines(states.tts.engines, states.tts.defaultEngine);
  if (states.tts.available) await tts.voices.loadVoices();
  if (states.loading && loadingPolls < MAX_LOADING_POLLS) {
    loadingPolls += 1;
    schedule(enter, LOADING_POLL_MS);
  }
}

function showGate(decision) {
  app.hidden = true;
  signOutButton.hidden = true;
  who.textContent = "";
  shownAdmin = null;
  admin.show(false);
  gate.section.hidden = false;
  gate.message.textContent = decision.message;
  gate.pinForm.hidden = decision.view !== "pin";
  gate.keyForm.hidden = decision.view !== "key";
  gate.pinError.textContent = "";
  gate.keyError.textContent = "";
  if (decision.view === "wait") countDown(decision.retryAfterS);
  if (decision.view === "unreachable" && unreachableRetries < MAX_UNREACHABLE_RETRIES) {
    unreachableRetries += 1;
    schedule(enter, UNREACHABLE_RETRY_MS);
  }
  if (decision.view === "pin") gate.pinInput.focus();
  if (decision.view === "key") gate.keyInput.focus();
}

function countDown(seconds) {
  let left = seconds;
  const tick = () => {
    if (left <= 0) {
      enter();
      return;
    }
    gate.message.textContent = `Too many sign-in attempts. Try again in ${left} s.`;
    left -= 1;
    schedule(tick, 1000);
  };
  tick();
}

async function submitPin(pin) {
  const result = await signInWithPin(pin);
  if (result.status === 204 || result.status === 201) {
    gate.pinInput.value = "";
    await enter();
  } else {
    gate.pinError.textContent = signInError(result, "PIN");
  }
}

gate.pinForm.addEventListener("submit", (event) => {
  event.preventDefault();
  submitPin(gate.pinInput.value.trim());
});

gate.keyForm.addEventListener("submit", async (event) => {
  event.preventDefault();
  const result = await signInWithKey(gate.keyInput.value.trim());
  if (result.status === 204 || result.status === 201) {
    gate.keyInput.value = "";  // the key is not kept anywhere by the page
    await enter();
  } else {
    gate.keyError.textContent = signInError(result, "key");
  }
});

signOutButton.addEventListener("click", async () => {
  if (dictation.session) dictation.session.stop();
  if (tts.session) tts.session.stop();
  await signOut();
  await enter();
});

enter();
