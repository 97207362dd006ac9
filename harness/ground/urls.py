"""Keep credentials out of messages: every tracking or database URL the harness prints goes through here."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

_SECRET_KEYS = re.compile(r"(pass|pwd|secret|token|key|auth|sig|credential)", re.IGNORECASE)
_MASK = "***"


def redact_url(url: str | None) -> str:
    """``url`` with its password and secret-looking query values replaced by ``***``.

    ``https://alice:s3cret@host/x?token=abc&a=1`` -> ``https://alice:***@host/x?token=***&a=1``.
    A user name alone (no password) is kept; a token given as the user name
    (``https://TOKEN@host``) is masked too, since it cannot be told apart from a secret.
    """
    if url is None:
        return "None"
    url = str(url)
    try:
        parts = urlsplit(url)
    except ValueError:
        return _MASK
    netloc = parts.netloc
    if "@" not in netloc and not (parts.query and any(_SECRET_KEYS.search(k) for k, _ in parse_qsl(parts.query))):
        return url  # nothing to hide; keep it byte for byte (sqlite:////abs/path)
    if "@" in netloc:
        userinfo, _, hostport = netloc.rpartition("@")
        user, sep, _password = userinfo.partition(":")
        netloc = f"{user}:{_MASK}@{hostport}" if sep else f"{_MASK}@{hostport}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        query = urlencode([(k, _MASK if _SECRET_KEYS.search(k) else v) for k, v in pairs], safe="*")
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def redact_text(text: str, url: str | None) -> str:
    """``text`` (e.g. an exception message) with ``url`` and its secrets masked wherever they occur."""
    if not url:
        return text
    url = str(url)
    text = text.replace(url, redact_url(url))
    try:
        parts = urlsplit(url)
    except ValueError:
        return text
    secrets = []
    if parts.password:
        secrets.append(parts.password)
    elif parts.username and "@" in parts.netloc:
        secrets.append(parts.username)
    secrets += [v for k, v in parse_qsl(parts.query) if _SECRET_KEYS.search(k) and v]
    for secret in secrets:
        if len(secret) >= 3:
            text = text.replace(secret, _MASK)
    return text


def sqlite_file(url: str) -> Path | None:
    """The file a ``sqlite:`` URL opens, as SQLAlchemy reads the URL; None for an in-memory database.

    The query string is no part of the path: ``sqlite:////abs/x.db?timeout=30`` is ``/abs/x.db``
    (SQLAlchemy hands ``timeout`` to the driver). With ``uri=true`` the database is a ``file:``
    URI (SQLAlchemy passes ``mode`` and the other driver options on in it), whose path is the file.
    A URL SQLAlchemy cannot read is a ``ValueError``.
    """
    from sqlalchemy.engine import make_url  # imported here: the CLI starts without SQLAlchemy
    from sqlalchemy.exc import ArgumentError

    try:
        parsed = make_url(url)
    except ArgumentError as err:
        raise ValueError(str(err)) from None
    database = parsed.database or ""
    if str(parsed.query.get("uri", "")).lower() in {"true", "1"}:
        if parsed.query.get("mode") == "memory":
            return None
        database = unquote(urlsplit(database).path) if database.startswith("file:") else database
    if not database or database == ":memory:":
        return None
    return Path(database)
