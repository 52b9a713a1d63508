// The engine and voice pickers of the speech panel (GET /v1/engines, GET
// /v1/voices), and the admin-only form that adds a voice by cloning an uploaded
// WAV (POST /v1/voices, multipart id/file/engine) on engines that can clone.

import {codeOf, detailOf, request} from "./api.js";

/** Words for a failed clone, by the answer's machine code. */
function cloneProblem(result) {
  const detail = detailOf(result);
  switch (codeOf(result)) {
    case "voice_exists":
      return `A voice of that name exists already: ${detail}.`;
    case "clone_unsupported":
      return `This engine cannot clone voices: ${detail}.`;
    case "too_large":
      return `The file is too large: ${detail}.`;
    case "bad_request":
    case "bad_audio":
      return `The sample was not accepted: ${detail}.`;
    case "admin_required":
    case "loopback_required":
      return "Adding voices needs an admin (this machine, or the admin API key in server mode).";
    default:
      return `Adding the voice failed (${result.status || "no answer"})${detail ? ": " + detail : ""}.`;
  }
}

/** A name a person can read: the server's own, or one made from the id ("en_US-lessac-medium" -> "Lessac (en-US, medium)"). */
export function readableVoiceName(voice) {
  if (voice.name && voice.name !== voice.id) return voice.name;
  const piper = /^([a-z]{2,3})_([A-Z]{2})-(.+)-(x_low|low|medium|high)$/.exec(voice.id);
  const words = (text) => text.split(/[-_\s]+/).filter(Boolean)
    .map((w) => w.charAt(0).toUpperCase() + w.slice(1)).join(" ");
  if (piper) return `${words(piper[3])} (${piper[1]}-${piper[2]}, ${piper[4].replace("_", " ")})`;
  return words(voice.id) || voice.id;
}

export class VoicePicker {
  constructor(el, {onChange}) {
    this.el = el;  // {engine, voice, voiceId, clone: {details, form, id, file, submit, status}}
    this.onChange = onChange;
    this.engines = [];
    this.voices = [];
    this.defaults = {};
    this.admin = false;
    el.engine.addEventListener("change", () => { this.fillVoices(); this.onChange(); });
    el.voice.addEventListener("change", () => this.showVoiceId());
    el.clone.form.addEventListener("submit", (event) => { event.preventDefault(); this.clone(); });
  }

  /** TTS engines from GET /v1/engines; ready ones can be picked. */
  setEngines(engines, defaultEngine) {
    const select = this.el.engine;
    const kept = select.value;
    select.replaceChildren();
    for (const engine of engines) {
      const ready = engine.state === "ready";
      const option = new Option(ready ? engine.id : `${engine.id} (${engine.state})`, engine.id);
      option.disabled = !ready;
      select.append(option);
    }
    this.engines = engines;
    const usable = (id) => engines.some((e) => e.id === id && e.state === "ready");
    select.value = usable(kept) ? kept : defaultEngine || "";
    select.disabled = !engines.some((e) => e.state === "ready");
    this.fillVoices();
  }

  /** Voices from GET /v1/voices. */
  async loadVoices() {
    const result = await request("GET", "/v1/voices");
    this.voices = result.status === 200 ? result.body.voices || [] : [];
    this.defaults = result.status === 200 ? result.body.defaults || {} : {};
    this.fillVoices();
  }

  fillVoices() {
    const select = this.el.voice;
    const engine = this.el.engine.value;
    const kept = select.value;
    const voices = this.voices.filter((v) => v.engine === engine);
    const names = voices.map(readableVoiceName);
    select.replaceChildren(...voices.map((v, i) => {
      const twice = names.indexOf(names[i]) !== names.lastIndexOf(names[i]);
      const option = new Option(twice ? `${names[i]} (${v.id})` : names[i], v.id);
      option.title = v.id;
      return option;
    }));
    if (voices.some((v) => v.id === kept)) select.value = kept;
    else if (voices.some((v) => v.id === this.defaults[engine])) select.value = this.defaults[engine];
    select.disabled = voices.length === 0;
    this.showVoiceId();
    this.refreshClone();
  }

  showVoiceId() {
    const id = this.el.voice.value;
    this.el.voiceId.textContent = id ? `Voice id: ${id}` : "";
  }

  /** The readable name of a voice, for messages. */
  nameOf(engine, id) {
    const voice = this.voices.find((v) => v.engine === engine && v.id === id);
    return voice ? readableVoiceName(voice) : id;
  }

  /** {engine, voice} for the socket's query, or {} when nothing is picked. */
  selection() {
    const out = {};
    if (this.el.engine.value) out.engine = this.el.engine.value;
    if (this.el.voice.value) out.voice = this.el.voice.value;
    return out;
  }

  setAdmin(admin) {
    this.admin = admin;
    this.refreshClone();
  }

  refreshClone() {
    const engine = this.engines.find((e) => e.id === this.el.engine.value);
    this.el.clone.details.hidden = !(this.admin && engine && engine.state === "ready" && engine.can_clone);
  }

  async clone() {
    const {id, file, submit, status} = this.el.clone;
    const file0 = file.files[0];
    if (!id.value.trim() || !file0) {
      status.textContent = "Give the voice a name and choose a WAV file.";
      return;
    }
    const form = new FormData();
    form.append("id", id.value.trim());
    form.append("engine", this.el.engine.value);
    form.append("file", file0, file0.name);
    submit.disabled = true;
    status.textContent = "Cloning the voice…";
    const result = await request("POST", "/v1/voices", {form});
    submit.disabled = false;
    if (result.status !== 201) {
      status.textContent = cloneProblem(result);
      return;
    }
    const voice = result.body.voice;
    status.textContent = `Voice ${voice.id} added.`;
    id.value = "";
    file.value = "";
    await this.loadVoices();
    this.el.voice.value = voice.id;
    this.showVoiceId();
    this.onChange();
  }
}
