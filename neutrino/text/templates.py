"""Chat templates: Hugging Face-compatible Jinja chat templates rendered with minijinja.

The environment mirrors the one ``transformers`` builds for chat templates: ``trim_blocks``
and ``lstrip_blocks``, loop controls (built into minijinja), ``raise_exception(msg)``,
``strftime_now(fmt)``, a ``tojson`` filter that is ``json.dumps(ensure_ascii=False, ...)``,
and Python-style methods (``.strip()``, ``.items()``, ...) through minijinja's pycompat mode.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import NoReturn

import minijinja

from neutrino.text.chat_messages import normalize_messages
from neutrino.text.errors import TemplateError
from neutrino.text.families import (
    DEFAULT_TEMPLATES_PATH,
    FamilyConfigError,
    ModelFamily,
    UnknownFamily,
    family_for_model,
    load_families,
)
from neutrino.text.template_fields import client_name, first_reached, none_fields
from neutrino.text.template_source import NOT_ITERABLE, LiteralError, prepare

__all__ = [
    "DEFAULT_TEMPLATES_PATH",
    "ChatTemplate",
    "FamilyConfigError",
    "ModelFamily",
    "TemplateError",
    "UnknownFamily",
    "family_for_model",
    "load_families",
    "normalize_messages",
    "tojson",
]

_TEMPLATE_NAME = "chat"


def tojson(
    value: object,
    ensure_ascii: bool = False,
    indent: int | str | None = None,
    separators: tuple[str, str] | None = None,
    sort_keys: bool = False,
) -> str:
    """The ``tojson`` filter of Hugging Face chat templates (no HTML escaping)."""
    return json.dumps(
        value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys
    )


def _raise_exception(message: object) -> NoReturn:
    raise TemplateError(str(message))


class _NotIterable(TemplateError):
    """A guarded loop's sequence was none (``loop``: its number in the prepared template)."""

    def __init__(self, loop: int) -> None:
        super().__init__("'NoneType' object is not iterable")
        self.loop = loop


def _not_iterable(loop: int) -> NoReturn:
    raise _NotIterable(loop)


def _iterable(value: object) -> bool:
    """jinja2's ``iterable`` test: none is not iterable (minijinja's own test says it is)."""
    if value is None:
        return False
    try:
        iter(value)  # type: ignore[call-overload]  # what iter refuses is the answer
    except TypeError:
        return False
    return True


class ChatTemplate:
    """A model family's chat template, compiled once; ``render`` is thread-safe.

    ``clock`` supplies the time for ``strftime_now`` (default: local ``datetime.now``).
    """

    __slots__ = ("_env", "_loops", "_specials", "family")

    def __init__(self, family: ModelFamily, *, clock: Callable[[], datetime] | None = None) -> None:
        now = datetime.now if clock is None else clock

        def strftime_now(fmt: str) -> str:
            return now().strftime(fmt)

        env = minijinja.Environment(
            trim_blocks=True,
            lstrip_blocks=True,
            keep_trailing_newline=False,
            pycompat=True,
            undefined_behavior="lenient",
            debug=False,
        )
        env.add_filter("tojson", tojson)
        env.add_test("iterable", _iterable)
        env.add_global("raise_exception", _raise_exception)
        env.add_global("strftime_now", strftime_now)
        env.add_global(NOT_ITERABLE, _not_iterable)
        try:
            prepared = prepare(family.template)
            env.add_template(_TEMPLATE_NAME, prepared.source)
        except LiteralError as e:
            raise TemplateError(f"chat template of {family.name!r} is invalid: {e}") from None
        except minijinja.TemplateError as e:
            raise TemplateError(f"chat template of {family.name!r} is invalid: {e.message}") from e
        self._loops = prepared.loops
        self.family = family
        self._env = env
        specials: dict[str, object] = {}
        if family.bos_token is not None:
            specials["bos_token"] = family.bos_token
        if family.eos_token is not None:
            specials["eos_token"] = family.eos_token
        self._specials = specials

    def render(
        self,
        messages: Sequence[Mapping[str, object]],
        *,
        add_generation_prompt: bool = True,
        tools: Sequence[Mapping[str, object]] | None = None,
        **extra: object,
    ) -> str:
        """The prompt text for ``messages`` (OpenAI-style dicts; see ``normalize_messages``).

        ``extra`` becomes template variables too (e.g. ``date_string``), overriding
        ``bos_token``/``eos_token`` if given. Raises :class:`TemplateError`.
        """
        context: dict[str, object] = {**self._specials, **extra}
        family = self.family
        context["messages"] = msgs = normalize_messages(
            messages,
            family.tool_call_arguments,
            image_parts=family.renders_images,
            tool_call_ids=family.tool_call_ids,
        )
        context["tools"] = None if tools is None else list(tools)
        context["add_generation_prompt"] = add_generation_prompt
        nulls = [m.get("role") == "assistant" and m.get("content") is None for m in msgs]
        if not any(nulls):
            return self._explained(context)
        emptied = [{**m, "content": ""} if null else m for m, null in zip(msgs, nulls, strict=True)]
        if family.null_content == "empty":
            context["messages"] = emptied
            return self._explained(context)
        try:
            return self._render(context)
        except TemplateError:
            # OpenAI clients send an assistant turn that only calls tools with "content":
            # null, which many published templates cannot render (they concatenate or
            # search the content). Where the template fails on it, render it as vLLM
            # does, with an empty string (if that fails too, its error is the one that
            # tells what is wrong); where it succeeds, None stays None (the text
            # transformers renders).
            pass
        context["messages"] = emptied
        return self._explained(context)

    def _explained(self, context: dict[str, object]) -> str:
        """``_render``, where a loop over none names the request field that was none."""
        try:
            return self._render(context)
        except _NotIterable as e:
            loop = e.loop
            expression = self._loops[loop]
            candidates = none_fields(expression, context)
            if not candidates:
                raise TemplateError(
                    f"the chat template cannot iterate over {expression}, which is null"
                ) from None

            def fails(trial: dict[str, object]) -> bool:
                try:
                    self._render(trial)
                except _NotIterable as again:
                    return again.loop == loop
                except TemplateError:
                    return False
                return False

            name = client_name(first_reached(candidates, context, fails))
        raise TemplateError(
            f"{name} must be given, not null, for this model: its chat template iterates over it",
            param=name,
        )

    def _render(self, context: dict[str, object]) -> str:
        try:
            text: str = self._env.render_template(_TEMPLATE_NAME, **context)
        except TemplateError:
            raise
        except minijinja.TemplateError as e:
            raise TemplateError(f"chat template failed: {e.message}") from e
        except (TypeError, ValueError, OverflowError) as e:  # from tojson
            raise TemplateError(f"chat template failed: {e}") from e
        return text
