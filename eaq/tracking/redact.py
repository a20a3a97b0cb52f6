"""Keep credentials out of every record: params, tags, env.json, config files, Hydra's files, logs.

A user's environment and command line carry secrets in values whose names give nothing
away: ``DATABASE_URL=postgresql://u:PASSWORD@host/db``, ``https_proxy=http://user:pw@proxy``,
``tracking.uri=https://user:pw@mlflow.example``, an ``Authorization: Bearer ...`` header, a
GitHub or Hugging Face token pasted into any variable. Redacting by name alone (eaq's
first rule, kept for environment variables) misses all of these, so every string that
goes into a record passes through ``redact`` here, the one place that knows the shapes:

- the password in ``scheme://user:password@`` (the whole user part when there is no
  password: a token is often passed as the user, ``https://TOKEN@github.com``), a password
  with an unescaped ``/``, ``?`` or ``#`` too (SQLAlchemy, behind MLflow's database stores,
  takes them raw). Not by shape one with a space: a URL with a port and an address later on its
  line (``http://host:5000 ... alice@corp.com``) would read as one, and lose what lies between.
  The passwords of the URLs eaq is given (the config's values, the store's URI) are known, though:
  ``remember`` keeps each one holding whitespace, and ``redact`` replaces it after the shapes, wherever
  it appears: as it is, escaped as Hydra writes an override (``pa\\ ss``) and wrapped as YAML folds a
  long line (``pa`` at one line's end, ``ss`` indented on the next). Only those: a password without whitespace is the shapes' (a
  known ``mlflow`` or ``password`` replaced as plain text would rewrite tag names such as
  ``mlflow.parentRunId`` and unkey ``password=`` pairs);
- the value of ``password=``, ``token=``, ``api_key=``, ``secret=``, ``sig=``... pairs
  (query strings, connection strings: up to ``&``, ``;`` or a space; a quoted value whole,
  spaces and commas included; in a ``key: value`` line, the rest of the line);
- ``Bearer <token>``, ``Basic <base64>`` (on one line: Hydra's files hold ``launcher: basic``
  at a line's end) and any ``Authorization`` header value; an ODBC ``Pwd=`` value;
- well-known token shapes (GitHub, GitLab, Hugging Face, OpenAI/Anthropic, AWS access
  key ids, Slack, Google API keys, Stripe, PyPI, npm, JWTs, PEM private keys).
"""

from __future__ import annotations

import logging
import re
import traceback
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from eaq.files import atomic_write_text

REDACTED = "<redacted>"
# The passwords holding whitespace of URLs this process was given (``remember``), raw or percent-decoded, each as the
# pattern ``_known`` makes of it: redacted after the shapes.
_KNOWN: dict[str, re.Pattern[str]] = {}
# A shorter one would also match ordinary text.
MIN_KNOWN_CHARS = 4

# scheme://userinfo@ ; the greedy userinfo runs to the last '@' of the authority, so a
# password with an unescaped '@' is still covered. Hydra's own files escape the colons
# of an override (``http\://user\:pw@host``), hence the optional backslashes.
_URL_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*\\?://)(?P<userinfo>[^\s/?#]+)@")
# user:password@ whose password holds an unescaped '/', '?' or '#', each of which ends the authority above; it runs to
# the last '@' before a space, a quote or another URL. A port (host:443/path...@ref, a pip requirement) is no password.
_ODD = r"(?:(?!://)[^\s@\"'])"
_URL_ODD_PASSWORD = re.compile(
    rf"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*\\?://)(?P<user>[^\s/?#:@]+)(?P<colon>\\?:)(?!\d{{1,5}}[/?#]){_ODD}*[/?#]{_ODD}*@"
)
# A name ending in _KEY or _PWD (OPENAI_KEY, MYSQL_PWD: the environment's SECRET_NAME) is one too; a bare "key" or
# "pwd" (a slot's key, the shell's PWD) is not.
_SECRET_WORD = (r"(?:password|passwd|passphrase|secret|token|api[_-]?key|apikey|access[_-]?key|account[_-]?key|private[_-]?key|"
                r"sig|signature|credentials?|auth|cookie|(?<=[_-])key|(?<=[_-])pwd)")
# key=value or key: value where the key ends in a secret word (user_password=, X-Amz-Signature=, "token": ...).
_SECRET_KEY = rf"\b[\w.-]*{_SECRET_WORD}[\"']?"
# A quoted value is the secret whole (spaces, commas); an unquoted one of a "key: value" line (YAML, a header:
# the key first on its line) runs to the end of the line; after "key=" (a query or connection string) to '&',
# ';' or a space.
_SECRET_QUOTED = re.compile(rf"(?P<key>{_SECRET_KEY}\s*[=:]\s*(?P<quote>[\"']))(?P<value>(?!{re.escape(REDACTED)})[^\"'\r\n]+)(?P=quote)", re.IGNORECASE)
_SECRET_LINE = re.compile(
    rf"(?P<key>^[ \t]*{_SECRET_KEY}:[ \t]+)(?P<value>(?![\"']|{re.escape(REDACTED)})[^\r\n]+)", re.IGNORECASE | re.MULTILINE
)
# Not a version pin's "=<version>" (google-auth==2.40.3, in the environment's package list): digits and dots to the
# value's end. Any other value after "==" (password==Xy9) is a secret still.
_VERSION_PIN = r"=\d+(?:\.\d+)+[\w.+!]*(?:[\s&;\"'<>,\]]|$)"
_SECRET_PAIR = re.compile(
    rf"(?P<key>{_SECRET_KEY}\s*[=:]\s*)(?P<value>(?![\"']|{_VERSION_PIN}|{re.escape(REDACTED)})[^\s&;\"'<>]+)",
    re.IGNORECASE,
)
_AUTHORIZATION = re.compile(r"(?P<key>\b(?:proxy-)?authorization[\"']?\s*[=:]\s*[\"']?)(?P<value>(?!<redacted>)[^\s\"'][^\r\n\"']*)", re.IGNORECASE)
_BEARER = re.compile(r"(?P<key>\bbearer[ \t]+)(?P<value>(?!<redacted>)[A-Za-z0-9._~+/=-]{8,})", re.IGNORECASE)
# Basic credentials: base64 of user:password, told from an ordinary word after "basic" by a digit, '+', '/' or '='.
_BASIC = re.compile(r"(?P<key>\bbasic[ \t]+)(?P<value>(?=[A-Za-z0-9+/]*[0-9+/=])[A-Za-z0-9+/]{8,}={0,2})", re.IGNORECASE)
# ODBC/ADO connection strings spell the password Pwd (Server=db;Uid=sa;Pwd=...): after a ';', since a shell's
# PWD=/work/main is a working directory.
_PWD = re.compile(r"(?P<key>;\s*pwd\s*=\s*)(?P<value>(?![\"']|<redacted>)[^\s;&\"'<>]+)", re.IGNORECASE)
_TOKEN_SHAPES = re.compile(
    "|".join(
        (
            r"\bgh[pousr]_[A-Za-z0-9]{36,}",  # GitHub
            r"\bgithub_pat_[A-Za-z0-9_]{22,}",
            r"\bglpat-[A-Za-z0-9_-]{20,}",  # GitLab
            r"\bhf_[A-Za-z0-9]{30,}",  # Hugging Face
            r"\bsk-[A-Za-z0-9_-]{20,}",  # OpenAI, Anthropic (sk-proj-, sk-ant-)
            r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b",  # AWS access key id
            r"\bxox[abposr]-[A-Za-z0-9-]{10,}",  # Slack
            r"\bAIza[0-9A-Za-z_-]{35}",  # Google API key
            r"\b[rs]k_live_[0-9A-Za-z]{16,}",  # Stripe
            r"\bpypi-[A-Za-z0-9_-]{50,}",  # PyPI
            r"\bnpm_[A-Za-z0-9]{36,}",  # npm
            r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",  # JWT
            r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?-----END [A-Z ]*PRIVATE KEY-----",  # PEM
        )
    ),
    re.DOTALL,
)


def _userinfo(match: re.Match[str]) -> str:
    user, has_password, _ = match["userinfo"].partition(":")
    return f"{match['scheme']}{user}:{REDACTED}@" if has_password else f"{match['scheme']}{REDACTED}@"


def remember(value: Any) -> None:
    """Keep the password of every URL among ``value``'s strings (a config, nested) that holds whitespace, for ``redact``
    to replace wherever it appears: the shapes cannot tell a space in a password from the text after a URL. Per
    process: each one that writes records calls it with what it was given (eaq.tasks.job, the sweep's callback, the
    store, the report)."""
    if isinstance(value, dict):
        for item in value.values():
            remember(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            remember(item)
    elif isinstance(value, str) and "://" in value and "@" in value:
        try:
            password = urlsplit(value.strip()).password
        except ValueError:  # not a URL after all (an invalid port, a bracket)
            return
        for secret in {password, unquote(password)} if password else ():
            if len(secret) >= MIN_KNOWN_CHARS and re.search(r"\s", secret):
                _KNOWN.setdefault(secret, _known(secret))


def _known(secret: str) -> re.Pattern[str]:
    """``secret`` as it is and as records spell it: Hydra escapes an override's special characters and spaces with a
    backslash (``pa\\ ss\\ word`` in overrides.yaml, multirun.yaml and its console lines), and YAML folds a line
    longer than 80 characters at a space (``hydra.job.override_dirname`` holds every override on one line), so a
    whitespace run may be a line break and the next line's indentation."""
    words = [r"(?:\\?" + r"\\?".join(re.escape(ch) for ch in word) + ")" for word in secret.split()]
    return re.compile(r"(?:\\?\s)+".join(words))


def redact(text: str) -> str:
    """``text`` with every credential the module docstring lists replaced by ``<redacted>``; idempotent."""
    text = _TOKEN_SHAPES.sub(REDACTED, text)
    text = _URL_ODD_PASSWORD.sub(lambda m: f"{m['scheme']}{m['user']}{m['colon']}{REDACTED}@", text)
    text = _URL_USERINFO.sub(_userinfo, text)
    text = _SECRET_QUOTED.sub(lambda m: f"{m['key']}{REDACTED}{m['quote']}", text)
    for pattern in (_AUTHORIZATION, _BEARER, _BASIC, _SECRET_LINE, _SECRET_PAIR, _PWD):
        text = pattern.sub(lambda m: f"{m['key']}{REDACTED}", text)
    for secret in sorted(_KNOWN, key=len, reverse=True):  # the longest first: one may hold another
        text = _KNOWN[secret].sub(REDACTED, text)
    return text


def redacted_traceback(exc: BaseException) -> str:
    """``exc``'s traceback as Python prints it, redacted: its frames and messages quote what they were given (a store's
    URI, MLflow's request URLs), and it goes to stderr and the log files that keep it."""
    return redact("".join(traceback.format_exception(exc)))


def redact_tree(value: Any) -> Any:
    """``redact`` applied to every string (keys included) of nested dicts, lists and tuples."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {redact_tree(k): redact_tree(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(redact_tree(v) for v in value)
    return value


def redact_file(path: Path) -> None:
    """Rewrite a text file with its credentials redacted; binary files (figures, tensors) are left alone.

    In place, so the job folder and the store keep the same, redacted, copy.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return
    clean = redact(text)
    if clean != text:
        atomic_write_text(path, clean)


def redact_folder(folder: Path) -> None:
    """``redact_file`` for every file under ``folder``."""
    for file in sorted(folder.rglob("*")):
        if file.is_file():
            redact_file(file)


class RedactingFilter(logging.Filter):
    """Redacts each record's final message, so no handler it is attached to writes a credential.

    Set on the handlers of Hydra's logging configs (conf/hydra/*_logging/redacted.yaml):
    a filter on a handler, unlike one on a logger, also sees what other loggers propagate.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        clean = redact(message)
        if clean != message:
            record.msg, record.args = clean, None
        return True
