"""Models built from values already of their fields' types, without validation.

The hot paths of scoring build thousands of findings and results per second from values they
made themselves; validating them again cost more than the checks. :func:`build_model` sets what
validation would set (the fields' dict, the fields set, extras, private state) through
pydantic's own slots; :func:`same_model` is how each fast path is checked, once at import,
against the validated build it replaces (falling back to that build if they ever differ).
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel

__all__ = ["build_model", "same_model"]

M = TypeVar("M", bound=BaseModel)

_new = BaseModel.__new__
_set_dict = vars(BaseModel)["__dict__"].__set__
_set_fields = vars(BaseModel)["__pydantic_fields_set__"].__set__
_set_extra = vars(BaseModel)["__pydantic_extra__"].__set__
_set_private = vars(BaseModel)["__pydantic_private__"].__set__


def build_model(
    cls: type[M],
    values: dict[str, Any],
    fields_set: set[str],
    extra: dict[str, Any] | None = None,
) -> M:
    """An instance of ``cls`` whose fields are ``values`` (in the declared order, every field,
    nothing else), whose fields set is ``fields_set`` (the caller's: it is kept), and whose
    extras are ``extra`` (none when not given; a model with ``extra="allow"``)."""
    model = _new(cls)
    _set_dict(model, values)
    _set_fields(model, fields_set)
    _set_extra(model, {} if extra is None else extra)
    _set_private(model, None)
    return model


def same_model(a: BaseModel, b: BaseModel) -> bool:
    """``a`` and ``b`` are the same in everything pydantic keeps: class, fields in order, fields
    set, extras, private state, and their JSON."""
    return (
        type(a) is type(b)
        and list(a.__dict__.items()) == list(b.__dict__.items())
        and a.__pydantic_fields_set__ == b.__pydantic_fields_set__
        and a.__pydantic_extra__ == b.__pydantic_extra__
        and a.__pydantic_private__ == b.__pydantic_private__
        and a.model_dump_json() == b.model_dump_json()
    )
