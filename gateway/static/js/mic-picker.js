// The microphone picker: the browser's audio inputs, the choice remembered in
// local storage. Device names are hidden by browsers until the microphone has
// been allowed once, so the list is read again after every start.

const STORAGE_KEY = "voxgate.microphone";

function remembered() {
  try { return localStorage.getItem(STORAGE_KEY) || ""; } catch { return ""; }
}

export class MicPicker {
  constructor(select) {
    this.select = select;
    select.addEventListener("change", () => {
      try { localStorage.setItem(STORAGE_KEY, select.value); } catch { /* private mode: not remembered */ }
    });
    if (navigator.mediaDevices && navigator.mediaDevices.addEventListener) {
      navigator.mediaDevices.addEventListener("devicechange", () => this.refresh());
    }
    this.refresh();
  }

  /** The chosen device id; "" for the system's default. */
  get deviceId() {
    return this.select.value;
  }

  async refresh() {
    let inputs = [];
    try {
      const devices = navigator.mediaDevices ? await navigator.mediaDevices.enumerateDevices() : [];
      inputs = devices.filter((d) => d.kind === "audioinput" && d.deviceId && d.deviceId !== "default");
    } catch { /* no device list: the default microphone only */ }
    const wanted = this.select.value || remembered();
    const options = [new Option("Default microphone", "")];
    inputs.forEach((d, i) => options.push(new Option(d.label || `Microphone ${i + 1}`, d.deviceId)));
    this.select.replaceChildren(...options);
    this.select.value = inputs.some((d) => d.deviceId === wanted) ? wanted : "";
  }

  setDisabled(disabled) {
    this.select.disabled = disabled;
  }
}
