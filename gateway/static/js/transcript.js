// The running transcript: finals appended as lines, the current partial under
// them in grey (its stable prefix darker) until its final replaces it; copy to
// the clipboard and clear.

const COPIED_NOTE_MS = 3000;

export class Transcript {
  constructor({finals, partialStable, partialUnstable, copy, clear, status}) {
    this.el = {finals, partialStable, partialUnstable, copy, clear, status};
    copy.addEventListener("click", () => this.copy());
    clear.addEventListener("click", () => this.clear());
    this.refreshButtons();
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

  addFinal(text) {
    this.clearPartial();
    if (!text.trim()) return;
    const line = document.createElement("p");
    line.className = "final";
    line.textContent = text.trim();
    this.el.finals.append(line);
    line.scrollIntoView({block: "nearest"});
    this.refreshButtons();
  }

  /** The finals, one per line. */
  text() {
    return [...this.el.finals.querySelectorAll("p")].map((p) => p.textContent).join("\n");
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

  clear() {
    this.el.finals.replaceChildren();
    this.clearPartial();
    const hadFocus = document.activeElement === this.el.clear;
    this.refreshButtons();
    if (hadFocus) this.el.finals.focus();  // the disabled button would drop the keyboard focus to the page
    this.note("Transcript cleared.");
  }

  note(text) {
    this.el.status.textContent = text;
    clearTimeout(this.noteTimer);
    this.noteTimer = setTimeout(() => { this.el.status.textContent = ""; }, COPIED_NOTE_MS);
  }

  refreshButtons() {
    const empty = this.el.finals.childElementCount === 0;
    this.el.copy.disabled = empty;
    this.el.clear.disabled = empty;
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
