"""The base of the platform's pydantic models: each is built the first time it is used, not when it is imported.

A cold start imports every model its handler's modules define (the API's contracts, every workflow's request,
result and tool models); building each one's validator and serializer then was about a tenth of the API function's
init, for models most requests never touch. With `defer_build` pydantic builds a model on its first validation,
serialization or schema (under its rebuild lock: concurrent first uses in the local runtime's threads are safe), so
a request pays only for the models it reaches. Subclass `Model`, not `BaseModel`; a model's own `model_config`
merges with this one. A `TypeAdapter` of a list or union of models is deferred the same way: make it with `adapter`.

A module that defines models does not import `annotations` from `__future__`: with it every field's annotation is a
string, which pydantic compiles and evaluates as it defines the model (a tenth of the API function's cold import, for
its two hundred models). A validator or method that names a class defined later quotes it (`-> "Routing"`), and one
returning its own model says `Self`. `tests/unit/test_cold_imports.py` checks it.
"""

from typing import TypeVar

from pydantic import BaseModel, ConfigDict, TypeAdapter

T = TypeVar("T")


class Model(BaseModel):
    model_config = ConfigDict(defer_build=True)


def adapter(annotation: type[T]) -> TypeAdapter[T]:
    """A `TypeAdapter` built on its first use (a model's own adapter already is: pydantic refuses a config for it)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return TypeAdapter(annotation)
    return TypeAdapter(annotation, config=ConfigDict(defer_build=True))
