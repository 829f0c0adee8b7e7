"""A folder of JSON files, one item each: read one, check it against a model, list them.

Personas, PersonaLab presets and agent profiles each keep ``<folder>/<id>.json`` files;
these helpers are what they share. A file that does not read raises
:class:`~storyloom.core.errors.FileFormatError` naming the file, the field and the reason.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from storyloom.core.errors import FieldProblem, FileFormatError, problems_from_validation

_M = TypeVar("_M", bound=BaseModel)


def read_json_object(path: Path) -> dict[str, Any]:
    """The JSON object in ``path``; :class:`FileFormatError` when the file is not UTF-8,
    not JSON or not an object."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise FileFormatError(path, [FieldProblem("", f"not UTF-8 text ({exc.reason})")]) from exc
    except json.JSONDecodeError as exc:
        reason = f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        raise FileFormatError(path, [FieldProblem("", reason)]) from exc
    if not isinstance(data, dict):
        raise FileFormatError(path, [FieldProblem("", "expected a JSON object")])
    return data


def validate_document(model: type[_M], data: Any, where: Path | str) -> _M:
    """``data`` as a ``model``, or :class:`FileFormatError` naming ``where``, field, reason."""
    if not isinstance(data, dict):
        raise FileFormatError(Path(where), [FieldProblem("", "expected a JSON object")])
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise FileFormatError(Path(where), problems_from_validation(exc)) from exc


def json_file_ids(folder: Path) -> list[str]:
    """The stems of the ``*.json`` files in ``folder``, sorted (none when it is missing)."""
    if not folder.is_dir():
        return []
    return sorted(p.stem for p in folder.glob("*.json") if p.is_file())


def model_json_text(model: BaseModel) -> str:
    """``model`` as the indented JSON text its file holds."""
    return json.dumps(model.model_dump(mode="json"), ensure_ascii=False, indent=2) + "\n"
