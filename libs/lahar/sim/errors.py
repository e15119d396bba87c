"""API errors as the API server reports them: a ``Status`` object with a reason and a code.

Messages follow the wording of the real API server (``pods "x" not found``) because clients
and people grep for them.
"""

from __future__ import annotations

from typing import Any

import msgspec


class ApiError(Exception):
    """A request that fails; becomes a ``Status`` reply with ``code``."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        details: dict[str, Any] | None = None,
        headers: list[tuple[bytes, bytes]] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.headers = headers or []

    def status(self) -> dict[str, Any]:
        return status_object(self.code, self.reason, self.message, self.details)

    def body(self) -> bytes:
        return msgspec.json.encode(self.status())


def status_object(code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
    }
    if reason:  # the server leaves it out of errors it has no reason for (e.g. a plain 500)
        status["reason"] = reason
    if details is not None:
        status["details"] = details
    status["code"] = code
    return status


def no_such_resource() -> ApiError:
    """A URL that names no resource the server serves (the server answers with empty details)."""
    return ApiError(404, "NotFound", "the server could not find the requested resource", {})


def success_status(code: int = 200, details: dict[str, Any] | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "code": code,
    }
    if details:
        status["details"] = details
    return status


def _details(resource: str, group: str, name: str) -> dict[str, Any]:
    details: dict[str, Any] = {"name": name}
    if group:
        details["group"] = group
    details["kind"] = resource
    return details


def qualified(resource: str, group: str) -> str:
    """``pods`` for the core group, ``podgroups.scheduling.volcano.sh`` otherwise."""
    return f"{resource}.{group}" if group else resource


def not_found(resource: str, group: str, name: str) -> ApiError:
    return ApiError(
        404, "NotFound", f'{qualified(resource, group)} "{name}" not found', _details(resource, group, name)
    )


def already_exists(resource: str, group: str, name: str) -> ApiError:
    return ApiError(
        409,
        "AlreadyExists",
        f'{qualified(resource, group)} "{name}" already exists',
        _details(resource, group, name),
    )


def conflict(resource: str, group: str, name: str, why: str) -> ApiError:
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {qualified(resource, group)} "{name}": {why}',
        _details(resource, group, name),
    )


STALE = "the object has been modified; please apply your changes to the latest version and try again"


# field.ErrorType of k8s.io/apimachinery: a cause's reason follows from its message's first words.
_CAUSE_REASONS = (
    ("Required value", "FieldValueRequired"),
    ("Unsupported value", "FieldValueNotSupported"),
    ("Forbidden", "FieldValueForbidden"),
    ("Duplicate value", "FieldValueDuplicate"),
    ("Too long", "FieldValueTooLong"),
    ("Too many", "FieldValueTooMany"),
    ("Not found", "FieldValueNotFound"),
    ("Internal error", "InternalError"),
)


def cause_reason(why: str) -> str:
    return next((reason for prefix, reason in _CAUSE_REASONS if why.startswith(prefix)), "FieldValueInvalid")


def invalid(kind: str, group: str, name: str, causes: list[tuple[str, str]]) -> ApiError:
    """422 Invalid; ``causes`` are ``(field, why)`` pairs, as in ``spec.containers: Required value``."""
    text = ", ".join(f"{field}: {why}" for field, why in causes)
    qualified_kind = f"{kind}.{group}" if group else kind
    details: dict[str, Any] = {"name": name} if name else {}
    if group:
        details["group"] = group
    details["kind"] = kind
    details["causes"] = [{"reason": cause_reason(why), "message": why, "field": field} for field, why in causes]
    return ApiError(422, "Invalid", f'{qualified_kind} "{name}" is invalid: {text}', details)


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def method_not_allowed(
    message: str = "the server does not allow this method on the requested resource",
) -> ApiError:
    return ApiError(405, "MethodNotAllowed", message)


def unsupported_media(content_type: str) -> ApiError:
    return ApiError(
        415,
        "UnsupportedMediaType",
        "the body of the request was in an unknown format - accepted media types include: "
        "application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json; "
        f"got {content_type!r}",
    )


def internal(message: str) -> ApiError:
    return ApiError(500, "InternalError", f"Internal error occurred: {message}", {"causes": [{"message": message}]})
