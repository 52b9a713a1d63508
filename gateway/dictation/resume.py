"""Resume tokens of /v1/dictation: the shared token store and resume socket
(gateway/resume_tokens.py), and how many ended dictation sessions it keeps."""

from __future__ import annotations

from gateway.resume_tokens import MAX_SPENT as MAX_SPENT
from gateway.resume_tokens import SPENT_KEEP_GRACES as SPENT_KEEP_GRACES
from gateway.resume_tokens import ResumeStore as ResumeStore
from gateway.resume_tokens import principal_owner as principal_owner
from gateway.resume_tokens import resume_socket as resume_socket

KEPT_PER_STREAM = 4  # ended sessions kept for their tokens, per allowed dictation stream
