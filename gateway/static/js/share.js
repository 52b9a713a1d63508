// LAN sharing in the admin panel: a switch that starts or ends sharing
// (POST/DELETE /v1/admin/share), and while it is on the PIN, the link, a QR
// code of the link for a phone's camera and the SHA-256 fingerprint of the
// certificate the https link serves (a phone shows it in its one-time warning).

import {codeOf, detailOf, request} from "./api.js";
import {encodeQr} from "./qr.js";

const SVG = "http://www.w3.org/2000/svg";
const QUIET_MODULES = 4;  // the light margin scanners need around the symbol

/** An SVG picture of the QR code of `text`: black on white whatever the page's colours. */
export function qrSvg(text, label) {
  const rows = encodeQr(text);
  const size = rows.length + 2 * QUIET_MODULES;
  const svg = document.createElementNS(SVG, "svg");
  svg.setAttribute("viewBox", `0 0 ${size} ${size}`);
  svg.setAttribute("role", "img");
  svg.setAttribute("aria-label", label);
  svg.setAttribute("shape-rendering", "crispEdges");
  const background = document.createElementNS(SVG, "rect");
  background.setAttribute("width", String(size));
  background.setAttribute("height", String(size));
  background.setAttribute("fill", "#fff");
  let d = "";
  rows.forEach((row, y) => row.forEach((dark, x) => {
    if (dark) d += `M${x + QUIET_MODULES} ${y + QUIET_MODULES}h1v1h-1z`;
  }));
  const modules = document.createElementNS(SVG, "path");
  modules.setAttribute("d", d);
  modules.setAttribute("fill", "#000");
  svg.append(background, modules);
  return svg;
}

export class SharePanel {
  constructor(el) {
    this.el = el;  // {toggle, details, pin, link, qr, status, tls, fingerprint}
    this.busy = false;
    el.toggle.addEventListener("change", () => this.toggled());
  }

  async refresh() {
    const result = await request("GET", "/v1/admin/share");
    if (result.status === 200) this.show(result.body.enabled ? result.body : null);
  }

  async toggled() {
    if (this.busy) return;
    this.busy = true;
    this.el.toggle.disabled = true;
    const on = this.el.toggle.checked;
    this.el.status.textContent = on ? "Starting LAN sharing…" : "Ending LAN sharing…";
    const result = await request(on ? "POST" : "DELETE", "/v1/admin/share");
    this.busy = false;
    this.el.toggle.disabled = false;
    if (on && result.status === 201) {
      this.show(result.body);
      this.el.status.textContent = "Sharing on. Open the link on the other device, or scan the code.";
    } else if (!on && result.status === 204) {
      this.show(null);
      this.el.status.textContent = "Sharing off. The PIN no longer works.";
    } else {
      this.el.toggle.checked = !on;
      const why = codeOf(result) === "share_unavailable" ? detailOf(result) : `${result.status || "no answer"} ${detailOf(result)}`;
      this.el.status.textContent = `LAN sharing could not be ${on ? "started" : "ended"}: ${why}.`;
    }
  }

  /** `info` is {pin, url, port, fingerprint} while sharing, null when not. */
  show(info) {
    this.el.toggle.checked = info !== null;
    this.el.details.hidden = info === null;
    this.el.qr.replaceChildren();
    if (info === null) return;
    this.el.pin.textContent = info.pin || "";
    this.el.link.href = info.url;
    this.el.link.textContent = info.url;
    this.el.tls.hidden = !info.fingerprint;
    this.el.fingerprint.textContent = info.fingerprint || "";
    this.el.qr.append(qrSvg(info.url, "QR code of the share link"));
  }
}
