// Keeps the screen on while dictating (the Screen Wake Lock API, where the
// browser has it). The browser drops the lock when the page is hidden; it is
// asked for again when the page is shown while still wanted.

export class ScreenAwake {
  constructor() {
    this.wanted = false;
    this.lock = null;
    document.addEventListener("visibilitychange", () => {
      if (this.wanted && document.visibilityState === "visible" && !this.lock) this.acquire();
    });
  }

  get supported() {
    return Boolean(navigator.wakeLock && navigator.wakeLock.request);
  }

  async start() {
    this.wanted = true;
    await this.acquire();
  }

  async acquire() {
    if (!this.supported || this.lock) return;
    try {
      const lock = await navigator.wakeLock.request("screen");
      if (!this.wanted) { lock.release(); return; }
      this.lock = lock;
      lock.addEventListener("release", () => { if (this.lock === lock) this.lock = null; });
    } catch { /* refused (battery saver, hidden page): dictation works without it */ }
  }

  stop() {
    this.wanted = false;
    const lock = this.lock;
    this.lock = null;
    if (lock) lock.release().catch(() => {});
  }
}
