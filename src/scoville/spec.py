"""The base of scoville's typed option specs: one pydantic model is both a command's options and its API.

Options are validated once, here, and a bad one is a ``UserError`` naming the flag as the command line
spells it (``--idle-gap-cap: Input should be greater than or equal to 0``), never a pydantic traceback.
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from scoville.errors import UserError

S = TypeVar("S", bound="Spec")


class Spec(BaseModel):
    """A frozen set of options; unknown names are refused (a typo must not be silently ignored)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    @classmethod
    def of(cls: type[S], **fields: Any) -> S:
        """The spec of ``fields``, or one line naming the first bad option as a flag, and how many there are."""
        try:
            return cls(**fields)
        except ValidationError as e:
            err = e.errors()[0]
            flag = "--" + "-".join(str(x) for x in err["loc"] if isinstance(x, str)).replace("_", "-")
            more = f" ({len(e.errors())} problems in all)" if len(e.errors()) > 1 else ""
            raise UserError(f"{flag}: {err['msg']}{more}") from None

    @classmethod
    def of_flat(cls: type[S], **options: Any) -> S:
        """The spec of options given flat, as a command line gives them (``isl=``, ``concurrency=``): each
        sub-spec field (``workload``, ``load``) takes the options it declares, the spec the rest."""
        nested = {}
        for name, field in cls.model_fields.items():
            sub = field.annotation
            if isinstance(sub, type) and issubclass(sub, Spec):
                nested[name] = sub.of(**{k: options.pop(k) for k in list(options) if k in sub.model_fields})
        return cls.of(**nested, **options)

