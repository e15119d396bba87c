"""Kubernetes name and label validation with apimachinery's wording.

Each ``is_*`` returns the list of problems (empty when valid), like Go's ``validation.Is*``,
because Volcano embeds those lists in its messages (``… validate failed [msg1 msg2]``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache

_QNAME_CHAR = "[A-Za-z0-9]"
_QNAME_EXT = "[-A-Za-z0-9_.]"
QUALIFIED_NAME_FMT = f"({_QNAME_CHAR}{_QNAME_EXT}*)?{_QNAME_CHAR}"
_QUALIFIED_NAME = re.compile(f"^{QUALIFIED_NAME_FMT}$")
QUALIFIED_NAME_MAX = 63
_QUALIFIED_NAME_MSG = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
)

DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_LABEL = re.compile(f"^{DNS1123_LABEL_FMT}$")
DNS1123_LABEL_MAX = 63
_DNS1123_LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start "
    "and end with an alphanumeric character"
)

DNS1123_SUBDOMAIN_FMT = f"{DNS1123_LABEL_FMT}(\\.{DNS1123_LABEL_FMT})*"
_DNS1123_SUBDOMAIN = re.compile(f"^{DNS1123_SUBDOMAIN_FMT}$")
DNS1123_SUBDOMAIN_MAX = 253
_DNS1123_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
    "start and end with an alphanumeric character"
)

LABEL_VALUE_FMT = f"({QUALIFIED_NAME_FMT})?"
_LABEL_VALUE = re.compile(f"^{LABEL_VALUE_FMT}$")
_LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must "
    "start and end with an alphanumeric character"
)

_IANA_SVC = re.compile("^[a-z0-9]([a-z0-9-]*[a-z0-9])?$")
_C_IDENT = re.compile("^[A-Za-z_][A-Za-z0-9_]*$")


def regex_error(msg: str, fmt: str, *examples: str) -> str:
    """apimachinery's RegexError, spacing included."""
    if not examples:
        return f"{msg} (regex used for validation is '{fmt}')"
    shown = " or ".join(f"'{e}', " for e in examples)
    return f"{msg} (e.g. {shown}regex used for validation is '{fmt}')"


def max_len_error(n: int) -> str:
    return f"must be no more than {n} characters"


def go_list(items: Sequence[str]) -> str:
    """Go's ``%v`` of a []string."""
    return "[" + " ".join(items) + "]"


@lru_cache(maxsize=8192)
def is_qualified_name(value: str) -> tuple[str, ...]:
    errs: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            errs.extend("prefix part " + m for m in is_dns1123_subdomain(prefix))
    else:
        return (
            "a qualified name "
            + regex_error(_QUALIFIED_NAME_MSG, QUALIFIED_NAME_FMT, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
        )
    if not name:
        errs.append("name part must be non-empty")
    elif len(name) > QUALIFIED_NAME_MAX:
        errs.append("name part " + max_len_error(QUALIFIED_NAME_MAX))
    if name and not _QUALIFIED_NAME.match(name):
        errs.append("name part " + regex_error(_QUALIFIED_NAME_MSG, QUALIFIED_NAME_FMT, "MyName", "my.name", "123-abc"))
    return tuple(errs)


@lru_cache(maxsize=8192)
def is_dns1123_label(value: str) -> tuple[str, ...]:
    errs: list[str] = []
    if len(value) > DNS1123_LABEL_MAX:
        errs.append(max_len_error(DNS1123_LABEL_MAX))
    if not _DNS1123_LABEL.match(value):
        errs.append(regex_error(_DNS1123_LABEL_MSG, DNS1123_LABEL_FMT, "my-name", "123-abc"))
    return tuple(errs)


@lru_cache(maxsize=8192)
def is_dns1123_subdomain(value: str) -> tuple[str, ...]:
    errs: list[str] = []
    if len(value) > DNS1123_SUBDOMAIN_MAX:
        errs.append(max_len_error(DNS1123_SUBDOMAIN_MAX))
    if not _DNS1123_SUBDOMAIN.match(value):
        errs.append(regex_error(_DNS1123_SUBDOMAIN_MSG, DNS1123_SUBDOMAIN_FMT, "example.com"))
    return tuple(errs)


@lru_cache(maxsize=8192)
def is_label_value(value: str) -> tuple[str, ...]:
    errs: list[str] = []
    if len(value) > QUALIFIED_NAME_MAX:
        errs.append(max_len_error(QUALIFIED_NAME_MAX))
    if not _LABEL_VALUE.match(value):
        errs.append(regex_error(_LABEL_VALUE_MSG, LABEL_VALUE_FMT, "MyValue", "my_value", "12345"))
    return tuple(errs)


@lru_cache(maxsize=8192)
def is_port_name(value: str) -> tuple[str, ...]:
    """IsValidPortName: an IANA service name (≤15, a letter, no '--')."""
    errs: list[str] = []
    if len(value) > 15:
        errs.append(max_len_error(15))
    if not _IANA_SVC.match(value):
        errs.append("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)")
    if "--" in value:
        errs.append("must not contain consecutive hyphens")
    if value and not any(c.isalpha() for c in value):
        errs.append("must contain at least one letter (a-z)")
    return tuple(errs)


@lru_cache(maxsize=8192)
def is_env_var_name(value: str) -> tuple[str, ...]:
    """Relaxed env var names (Kubernetes ≥1.32): printable ASCII other than '='."""
    if not value or any(not (32 <= ord(c) <= 126) or c == "=" for c in value):
        return ("a valid environment variable name must consist only of printable ASCII characters other than '='",)
    return ()


def is_c_identifier(value: str) -> bool:
    return bool(_C_IDENT.match(value))
