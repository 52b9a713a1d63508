// Human text for the close codes of the voxgate protocol (docs/protocol.md).

/** A sentence for the user, or "" for a normal end. `what` names the socket ("Dictation"). */
export function describeClose(what, code, reason) {
  const why = reason ? `: ${reason}` : "";
  switch (code) {
    case 1000:
      return "";
    case 1008:
      return `${what} was refused by the gateway${why || ": not signed in"}.`;
    case 1009:
      return `${what} stopped: a message was larger than the gateway accepts.`;
    case 1011:
      return `${what} stopped because of a server error${why}.`;
    case 1013:
      return `The gateway is busy (too many ${what.toLowerCase()} sessions right now). Try again in a moment.`;
    case 4400:
      return `${what} stopped: bad request${why}.`;
    case 4408:
      return `${what} was closed after a period without activity.`;
    case 1006:
      return `${what} lost its connection to the gateway.`;
    default:
      return `${what} ended unexpectedly (close code ${code}${reason ? ", " + reason : ""}).`;
  }
}

/** True when the refusal means the page must sign in again (the gate can help). */
export function needsSignIn(code, reason) {
  return code === 1008 && (reason === "PIN required" || reason === "API key required");
}
