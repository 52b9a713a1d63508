// The running transcript: finals appended as lines, each editable in place, the
// current partial under them in grey (its stable prefix darker) until its final
// replaces it. Kept across reloads (transcript-store.js); Copy and Download take
// the text as edited; Clear can be undone.

import {FORMATS, fileStem, saveBlob} from "./transcript-export.js";
import {loadLines, saveLines} from "./transcript-store.js";

const NOTE_MS = 3000;

function editable(p) {
  try {
    p.contentEditable = "plaintext-only";
  } catch {
    p.contentEditable = "true";  // browsers without plaintext-only: textContent is still plain
  }
  p.spellcheck = true;
}

export class Transcript {
  constructor(el) {
    this.el = el;  // {finals, partialStable, partialUnstable, copy, clear, undo, download, format, status}
    this.lines = loadLines();
    this.cleared = null;
    el.copy.addEventListener("click", () => this.copy());
    el.clear.addEventListener("click", () => this.clear());
    el.undo.addEventListener("click", () => this.undoClear());
    el.download.addEventListener("click", () => this.download());
    el.finals.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && event.target.classList.contains("final")) {
        event.preventDefault();  // one final is one line
        event.target.blur();
      }
    });
    this.render();
  }

  /** Where the next session's audio starts on the transcript's clock (seconds). */
  get endS() {
    return this.lines.length ? this.lines[this.lines.length - 1].end : 0;
  }

  showPartial(text, stable) {
    // `stable` is a prefix of `text` by contract; anything else is shown as unstable
    const prefix = stable && text.startsWith(stable) ? stable : "";
    this.el.partialStable.textContent = prefix;
    this.el.partialUnstable.textContent = text.slice(prefix.length);
  }

  clearPartial() {
    this.showPartial("", "");
  }

  /** A final with its times in the dictated audio; false when it had no words. */
  addFinal(text, start, end) {
    this.clearPartial();
    if (!text.trim()) return false;
    const line = {text: text.trim(), start, end};
    this.lines.push(line);
    const p = this.lineElement(line);
    this.el.finals.append(p);
    p.scrollIntoView({block: "nearest"});
    this.saved();
    return true;
  }

  lineElement(line) {
    const p = document.createElement("p");
    p.className = "final";
    p.textContent = line.text;
    editable(p);
    p.addEventListener("input", () => {
      line.text = p.textContent;
      this.saved();
    });
    return p;
  }

  render() {
    this.el.finals.replaceChildren(...this.lines.map((line) => this.lineElement(line)));
    this.refreshButtons();
  }

  saved() {
    if (!saveLines(this.lines)) this.note("The browser refused to keep the transcript; it is lost on reload.");
    this.refreshButtons();
  }

  /** The finals as edited, one per line. */
  text() {
    return FORMATS.txt.render(this.lines);
  }

  async copy() {
    const text = this.text();
    let ok = false;
    try {
      await navigator.clipboard.writeText(text);
      ok = true;
    } catch {
      ok = copyWithSelection(text);  // pages on plain http have no Clipboard API
    }
    this.note(ok ? "Transcript copied to the clipboard." : "Copying was refused by the browser; select the text and copy it by hand.");
  }

  download() {
    const format = FORMATS[this.el.format.value] ? this.el.format.value : "txt";
    const {type, render} = FORMATS[format];
    saveBlob(new Blob([render(this.lines)], {type: `${type};charset=utf-8`}), `${fileStem("transcript")}.${format}`);
  }

  clear() {
    this.cleared = this.lines;
    this.lines = [];
    this.clearPartial();
    const hadFocus = document.activeElement === this.el.clear;
    this.render();  // shows Undo
    saveLines(this.lines);
    if (hadFocus) this.el.undo.focus();
    this.note("Transcript cleared.", false);
  }

  undoClear() {
    if (!this.cleared) return;
    this.lines = this.cleared.concat(this.lines);  // finals that came meanwhile stay after the restored ones
    this.cleared = null;
    this.render();
    this.saved();
    this.el.finals.focus();
    this.note("Transcript restored.");
  }

  note(text, fades = true) {
    this.el.status.textContent = text;
    clearTimeout(this.noteTimer);
    if (fades) this.noteTimer = setTimeout(() => { this.el.status.textContent = ""; }, NOTE_MS);
  }

  refreshButtons() {
    const empty = !this.lines.some((line) => line.text.trim());
    this.el.copy.disabled = empty;
    this.el.clear.disabled = this.lines.length === 0;
    this.el.download.disabled = empty;
    this.el.format.disabled = empty;
    this.el.undo.hidden = this.cleared === null;
  }
}

function copyWithSelection(text) {
  const area = document.createElement("textarea");
  area.value = text;
  area.setAttribute("readonly", "");
  area.style.position = "fixed";
  area.style.opacity = "0";
  document.body.append(area);
  area.select();
  let ok = false;
  try { ok = document.execCommand("copy"); } catch { ok = false; }
  area.remove();
  return ok;
}
