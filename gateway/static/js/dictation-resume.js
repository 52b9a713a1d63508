// Where a resumable dictation session stands, so a dropped socket can resume it on
// the gateway (docs/protocol.md, "Resuming a dropped session"): the token of the
// latest `ready` (a secret, kept only here) and the last event applied.

/** Why the gateway could not resume a session, by the machine code of its refusal. */
export const RESUME_REFUSALS = {
  resume_expired: "the connection was down longer than the gateway holds a session",
  resume_lost: "the gateway could not keep all it had to send while the connection was down",
  resume_unknown: "the gateway no longer knows it",
  resume_elsewhere: "another replica of the gateway holds it, and this one answered",
  resume_used: "it was already resumed on another connection",
  resume_forbidden: "it belongs to another sign-in",
};

/** Every refusal of a resume has a `resume_` code: a code this page does not know yet is one too. */
export function isResumeRefusal(code) {
  return String(code).startsWith("resume_");
}

export function whyNotResumed(code) {
  return RESUME_REFUSALS[code] || `the gateway refused: ${code}`;
}

/** True when a gateway refused `resumable=true` itself (it holds no session after a drop). */
export function refusesResumable(code, reason) {
  return code === 4400 && String(reason).startsWith("resumable:");
}

export class ResumePoint {
  constructor() {
    this.token = null;      // null: no session held on the gateway to resume
    this.lastSeq = 0;
    this.offered = true;    // false once the gateway refused `resumable=true`
  }

  /** The query of a socket that resumes the session. */
  get query() {
    return {resume: this.token, last_seq: String(this.lastSeq)};
  }

  /** A new session's `ready`: its token (none from a gateway that does not resume). */
  started(ready) {
    this.token = typeof ready.resume_token === "string" ? ready.resume_token : null;
    this.lastSeq = 0;
  }

  /** A resumed session's `ready`: the token for the next resume. */
  resumed(ready) {
    this.token = ready.resume_token;
  }

  /** True for an event already applied; otherwise it counts as seen from now on. */
  seen(event) {
    if (typeof event.seq !== "number") return false;
    if (event.seq <= this.lastSeq) return true;
    this.lastSeq = event.seq;
    return false;
  }

  forget() {
    this.token = null;
    this.lastSeq = 0;
  }
}
