"""E-mail (.eml, RFC 5322/MIME) extraction with the standard library's `email` package.

Read: the headers Subject, From, To, Cc, Date and the attachments' names (first lines of the text;
the subject is the title and the heading of the message), the body (text/plain preferred, else
text/html through the HTML extractor, its headings under the subject), and each attachment as its own document through
the same extractors (PDF, DOCX, XLSX, PPTX, EPUB, ODF, HTML, CSV, text, and attached e-mails up
to MAX_DEPTH levels): its units keep their pages/slides/sheets/headings, under the heading
"<mail file>/<attachment name>". The index keeps one document per file on disk (what its
freshness checks and deletions follow), so an attachment is a part of its e-mail's document,
found by that heading. Not read: other headers, inline images, attachments of unsupported types
or that fail to read (each named in a warning), S/MIME or PGP encrypted bodies, more than
MAX_ATTACHMENTS attachments. Runs inside the extraction worker (one time and memory budget for
the whole message).
"""

from __future__ import annotations

import email
import email.policy
import io
from collections.abc import Callable
from dataclasses import dataclass, replace
from email.message import EmailMessage, Message
from pathlib import Path
from typing import IO

from foundation.errors import ExtractionError, GeneralAgentError
from indexing.extract.builder import TextBuilder
from indexing.extract.html_file import HEADING_CHARS, add_sections, parse_html
from indexing.extract.text import MARKDOWN_EXTENSIONS, decode_bytes, markdown_units, read_source
from indexing.model import Extracted, ExtractionLimits, Unit

HEADERS = ("Subject", "From", "To", "Cc", "Date")
MAX_ATTACHMENTS = 100
MAX_DEPTH = 3


# The worker's dispatch (kind, path, limits, source) -> Extracted, for attachments' formats.
Extractor = Callable[[str, Path, ExtractionLimits, IO[bytes] | None], Extracted]


def extract_eml(path: Path, limits: ExtractionLimits, source: IO[bytes] | None, extract: Extractor) -> Extracted:
    data, _ = read_source(path, source, limits.max_file_bytes)
    message = email.message_from_bytes(data, policy=email.policy.default)
    builder = TextBuilder(limits.max_extracted_chars)
    add_message(builder, message, _Context(path.name, limits, extract, 0))
    return builder.build("eml", title=header(message, "Subject") or None)


def header(message: Message, name: str) -> str:
    """A header's decoded value, one line ("" when absent)."""
    try:
        value = message.get(name)
    except Exception:  # a malformed header the policy cannot parse: its raw text
        value = next((raw for key, raw in message.raw_items() if key.lower() == name.lower()), "")
    return " ".join(str(value or "").split())


@dataclass(frozen=True)
class _Context:
    name: str  # the message's shown name: "mail.eml", or "mail.eml/fwd.eml" for an attached one
    limits: ExtractionLimits
    extract: Extractor
    depth: int

    def inner(self, name: str, chars: int) -> _Context:
        return _Context(name, replace(self.limits, max_extracted_chars=chars), self.extract, self.depth + 1)


def add_message(builder: TextBuilder, message: Message, context: _Context) -> bool:
    """Headers, body and attachments of one message; False once the text cap is reached."""
    subject = header(message, "Subject")[:HEADING_CHARS]
    root = (subject,) if subject else ()
    lines = [f"{h}: {v}" for h in HEADERS if (v := header(message, h))]
    names = _attachment_names(message)
    if names:
        lines.append("Attachments: " + ", ".join(names))
    head = "\n".join(lines)
    plain, html = _body(message)
    if not builder.add(head + ("\n\n" + plain if plain else ""), "section", heading_path=root):
        return False
    if html and not add_sections(builder, parse_html(html).sections, root):
        return False
    return _add_attachments(builder, message, context)


def _attachment_names(message: Message) -> list[str]:
    if not isinstance(message, EmailMessage):
        return []
    names = (" ".join((part.get_filename() or "").split()) for part in message.iter_attachments())
    return [name for name in names if name][:MAX_ATTACHMENTS]


def _body(message: Message) -> tuple[str, str]:
    """(plain text, HTML) of the message body; one of them is empty."""
    if not isinstance(message, EmailMessage):
        return "", ""
    part = message.get_body(preferencelist=("plain", "html"))
    if part is None:
        return "", ""
    text = _part_text(part)
    return ("", text) if part.get_content_subtype() == "html" else (text, "")


def _part_text(part: Message) -> str:
    payload = part.get_payload(decode=True)
    if not isinstance(payload, bytes):
        return ""
    charset = part.get_content_charset() or ""
    try:
        return payload.decode(charset or "utf-8")
    except (LookupError, UnicodeDecodeError):
        return decode_bytes(payload, "body")[0]


def _add_attachments(builder: TextBuilder, message: Message, context: _Context) -> bool:
    if not isinstance(message, EmailMessage):
        return True
    for number, part in enumerate(message.iter_attachments(), start=1):
        if number > MAX_ATTACHMENTS:
            builder.warnings.append(f"{context.name}: only the first {MAX_ATTACHMENTS} attachments were read")
            break
        filename = " ".join((part.get_filename() or "").split()) or f"attachment-{number}"
        shown = f"{context.name}/{filename}"
        room = builder.max_chars - builder.pos
        if room <= 2:
            return False
        try:
            extracted = _extract_part(part, filename, context.inner(shown, room))
        except MemoryError:
            raise
        except Exception as exc:  # one attachment's failure is a warning, never the e-mail's
            reason = str(exc) if isinstance(exc, GeneralAgentError) else f"{type(exc).__name__}: {exc}"
            builder.warnings.append(f"attachment {shown} was not read: {reason[:300]}")
            continue
        builder.warnings.extend(f"{shown}: {w}" for w in extracted.warnings if w != "file is empty")
        if not builder.add_extracted(extracted, (shown,)):
            return False
    return True


def _extract_part(part: EmailMessage, filename: str, context: _Context) -> Extracted:
    """One attachment; `context` is the attachment's own (its name, limits and depth)."""
    if context.depth > MAX_DEPTH:
        raise ExtractionError(f"attachments nested more than {MAX_DEPTH} e-mails deep are not read")
    if part.get_content_type() == "message/rfc822":
        return _message_document(_attached_message(part), context)
    from indexing.extract import detect_kind, is_supported

    if not is_supported(filename) or detect_kind(Path(filename)) == "image":  # pictures: not read by OCR here
        raise ExtractionError(f"unsupported type ({Path(filename).suffix or 'no extension'})")
    data = part.get_payload(decode=True)
    if not isinstance(data, bytes) or not data:
        return Extracted(text="", units=[], kind="text")
    kind = detect_kind(Path(filename))
    if kind == "eml":
        return _message_document(email.message_from_bytes(data, policy=email.policy.default), context)
    if kind == "text":
        return _text_document(Path(filename), data, context.limits)
    return context.extract(kind, Path(filename), context.limits, io.BytesIO(data))


def _message_document(message: Message, context: _Context) -> Extracted:
    builder = TextBuilder(context.limits.max_extracted_chars)
    add_message(builder, message, context)
    return builder.build("eml")


def _attached_message(part: EmailMessage) -> Message:
    """The e-mail inside a message/rfc822 part (parsed already, or transfer-encoded by some clients)."""
    payload = part.get_payload()
    if isinstance(payload, list) and payload and isinstance(payload[0], Message):
        return payload[0]
    data = part.get_payload(decode=True)
    return email.message_from_bytes(data if isinstance(data, bytes) else b"", policy=email.policy.default)


def _text_document(path: Path, data: bytes, limits: ExtractionLimits) -> Extracted:
    """A text attachment, decoded as text files are (Markdown gets its sections)."""
    text, encoding, warnings = decode_bytes(data, path.name)
    text = text[: limits.max_extracted_chars]
    markdown = path.suffix.lower() in MARKDOWN_EXTENSIONS
    units = markdown_units(text) if markdown else [Unit(0, len(text), "text")]
    return Extracted(text=text, units=units, kind="text", warnings=warnings, encoding=encoding)
