"""One SillyTavern JSON file read into its pydantic model, or refused whole.

The text is read as untrusted JSON (depth, size and number limits); a file that is not
UTF-8, not JSON, not an object or not the model is a
:class:`~storyloom.core.errors.FileFormatError` naming the file, each field and why.
"""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from storyloom.core.errors import FieldProblem, FileFormatError, field_path
from storyloom.sillytavern.untrusted_json import UntrustedJsonError, loads_untrusted

M = TypeVar("M", bound=BaseModel)


def parse_json_document(data: bytes | str, path: Path | str, model: type[M], what: str) -> M:
    """``data`` (read from ``path``) as ``model``; ``what`` names the kind of file in the
    error when the document is not a JSON object ("a group file")."""
    path = Path(path)
    try:
        text = data.decode("utf-8-sig") if isinstance(data, bytes) else data.removeprefix("\ufeff")
    except UnicodeDecodeError:
        raise FileFormatError(path, [FieldProblem("", "not UTF-8 text")]) from None
    try:
        document = loads_untrusted(text)
    except UntrustedJsonError as exc:
        raise FileFormatError(path, [FieldProblem(exc.where, exc.reason)]) from None
    if not isinstance(document, dict):
        raise FileFormatError(path, [FieldProblem("", f"{what} is a JSON object")])
    try:
        return model.model_validate(document)
    except ValidationError as exc:
        problems = [
            FieldProblem(field_path(tuple(err["loc"])), str(err["msg"])) for err in exc.errors()
        ]
        raise FileFormatError(path, problems) from None
