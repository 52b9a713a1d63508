// The live sessions list of the admin panel (GET /v1/admin/sessions), asked
// again every few seconds while the panel is shown and the page is visible.

import {request} from "./api.js";

const REFRESH_MS = 3000;
const COLUMNS = ["Kind", "Client", "Age", "Activity", "Behind"];  // the table's headers, for the phone layout

function activity(s) {
  if (s.kind === "dictation") return `${s.audio_s} s of audio, ${s.utterances} utterance(s)`;
  if (s.kind === "tts") return `${s.engine}/${s.voice}, ${s.frames_sent} frames, ${s.utterances} utterance(s)`;
  return "";
}

function behind(s) {
  if (s.kind === "dictation") return `${Number(s.lag_s || 0).toFixed(1)} s`;
  if (s.kind === "tts") return `${Number(s.queued_audio_s || 0).toFixed(1)} s queued`;
  return "";
}

export class SessionsList {
  constructor(el) {
    this.el = el;  // {body, status, refresh}
    this.timer = null;
    this.running = false;
    el.refresh.addEventListener("click", () => this.load());
  }

  start() {
    if (this.running) return;
    this.running = true;
    this.load();
  }

  stop() {
    this.running = false;
    clearTimeout(this.timer);
  }

  async load() {
    if (this.loading) return;
    this.loading = true;
    clearTimeout(this.timer);
    try {
      if (document.visibilityState !== "hidden") {
        const result = await request("GET", "/v1/admin/sessions");
        if (result.status === 200) this.render(result.body.sessions || []);
        else this.el.status.textContent = `The sessions could not be listed (${result.status || "no answer"}).`;
      }
    } finally {
      this.loading = false;
    }
    if (this.running) this.timer = setTimeout(() => this.load(), REFRESH_MS);
  }

  render(sessions) {
    this.el.status.textContent = sessions.length ? `${sessions.length} live session(s).` : "No live sessions.";
    this.el.body.replaceChildren(...sessions.map((s) => {
      const row = document.createElement("tr");
      [s.kind, s.client, `${Number(s.age_s).toFixed(0)} s`, activity(s), behind(s)].forEach((text, i) => {
        const cell = document.createElement("td");
        cell.textContent = text;
        cell.dataset.label = COLUMNS[i];
        row.append(cell);
      });
      return row;
    }));
  }
}
