// The admin panel, shown only to principals that may use the admin routes
// (GET /v1/auth/me says so): LAN sharing and the live sessions.

import {SessionsList} from "./sessions.js";
import {SharePanel} from "./share.js";

export class AdminPanel {
  constructor(el) {
    this.section = el.section;
    this.share = new SharePanel(el.share);
    this.sessions = new SessionsList(el.sessions);
  }

  show(admin) {
    this.section.hidden = !admin;
    if (admin) {
      this.share.refresh();
      this.sessions.start();
    } else {
      this.sessions.stop();
    }
  }
}
