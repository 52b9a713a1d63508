"""The one reader of an uploaded file: a ``multipart/form-data`` body with one
file part, for ``POST /v1/audio/transcriptions`` and ``POST /v1/voices``.

The raw stream is counted before the multipart parser sees it (413 past the
file limit plus ``MULTIPART_OVERHEAD_BYTES``), the parser is told how many
parts it may build, and its own errors become a ``BadRequest``. The form's
files are closed when the ``async with`` ends.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from starlette.datastructures import FormData, UploadFile
from starlette.requests import Request

from gateway.errors import BadRequest, TooLarge
from gateway.protocol.json import bounded_request

MULTIPART_OVERHEAD_BYTES = 64 * 1024  # the form's other fields and part headers


@asynccontextmanager
async def multipart_form(request: Request, max_file_bytes: int, *, max_fields: int,
                         not_multipart: str) -> AsyncIterator[FormData]:
    """The parsed form of ``request``; ``not_multipart``: the error for another content type."""
    if not request.headers.get("content-type", "").startswith("multipart/form-data"):
        raise BadRequest(not_multipart)
    try:
        form = await bounded_request(request, max_file_bytes + MULTIPART_OVERHEAD_BYTES).form(
            max_files=1, max_fields=max_fields)
    except TooLarge:
        raise
    except Exception as exc:  # the multipart parser's own errors: malformed body, too many parts
        raise BadRequest(f"the multipart body cannot be parsed: {exc}") from None
    try:
        yield form
    finally:
        await form.close()


async def read_file_field(form: FormData, name: str, max_bytes: int, *, missing: str) -> bytes:
    """The bytes of the file part ``name`` (``missing``: the error when there is none);
    413 when it holds more than ``max_bytes``."""
    upload = form.get(name)
    if not isinstance(upload, UploadFile):
        raise BadRequest(missing)
    data = await upload.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise TooLarge(f"{name}: larger than {max_bytes} bytes")
    return data
