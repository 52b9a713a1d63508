// The elapsed time of a dictation, shown as m:ss (h:mm:ss past an hour).

const TICK_MS = 1000;

export function formatElapsed(seconds) {
  const s = Math.max(0, Math.floor(seconds));
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const ss = String(s % 60).padStart(2, "0");
  return h ? `${h}:${String(m).padStart(2, "0")}:${ss}` : `${m}:${ss}`;
}

export class ElapsedClock {
  constructor(el) {
    this.el = el;
    this.timer = null;
  }

  start() {
    this.stop();
    const started = Date.now();
    const show = () => { this.el.textContent = formatElapsed((Date.now() - started) / 1000); };
    show();
    this.el.hidden = false;
    this.timer = setInterval(show, TICK_MS);
  }

  /** Stops counting; the last figure stays until the next start. */
  stop() {
    clearInterval(this.timer);
    this.timer = null;
  }
}
