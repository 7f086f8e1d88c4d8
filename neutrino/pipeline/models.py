"""Per-model text assets: family, chat template, tokenizer and stop tokens."""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field

from neutrino.config import ModelConfig
from neutrino.errors import ErrorKind, NeutrinoError
from neutrino.text.families import UnknownFamily
from neutrino.text.local_files import load_local_tokenizer, read_chat_template
from neutrino.text.model_folder import ModelFolder, read_model_folder
from neutrino.text.parsers import reasoning_parser_names, tool_parser_names
from neutrino.text.registry import load_tokenizer
from neutrino.text.templates import ChatTemplate, ModelFamily, family_for_model, load_families
from neutrino.text.tiktoken_files import check_family_tokens, tiktoken_file_tokenizer
from neutrino.text.tokenizer import Tokenizer

log = logging.getLogger("neutrino.models")
_MAX_WARNED = 1024  # model names the fallback warning remembers


def _tiktoken_key(model: str) -> str:
    return f'[model].tiktoken."{model}"'


@dataclass(frozen=True, slots=True)
class ModelText:
    name: str
    family: ModelFamily
    template: ChatTemplate
    tokenizer: Tokenizer
    stop_token_ids: frozenset[int]
    bos_token_id: int | None  # put in front of plain completion prompts (add_bos_token)
    # Sampling the model's folder asks for where a request does not say (field -> value).
    defaults: Mapping[str, float] = field(default_factory=dict)


class ModelTexts:
    """Resolves and caches :class:`ModelText` per served model name."""

    def __init__(self, cfg: ModelConfig) -> None:
        self._cfg = cfg
        self._fell_back: set[str] = set()  # model names already logged as unmatched
        self._families = load_families()
        for name, fam in cfg.families.items():
            if fam not in self._families:
                raise ValueError(f"model {name!r} names unknown family {fam!r}")
        if cfg.default_family not in self._families:
            raise ValueError(f"unknown default family {cfg.default_family!r}")
        for kind, chosen, known in (
            ("tool", cfg.tool_parsers, tool_parser_names()),
            ("reasoning", cfg.reasoning_parsers, reasoning_parser_names()),
        ):
            for name, parser in chosen.items():
                if parser != "none" and parser not in known:
                    raise ValueError(
                        f"model {name!r} names unknown {kind} parser {parser!r}; "
                        f"known: none, {', '.join(known)}"
                    )
        self._folders = {m: self._read_folder(m, p) for m, p in cfg.models.items()}
        self._templates = {m: self._read_template(m, p) for m, p in cfg.chat_templates.items()}
        for model, folder in self._folders.items():
            if folder.chat_template is not None and model not in self._templates:
                where = f"{folder.path / folder.template_from}"
                self._templates[model] = self._compiled(model, folder.chat_template, where)
            self._log_folder(model, folder)
        for model, rank_file in cfg.tiktoken.items():  # refused at start (and reload)
            family = self._families[self.family_name(model)]
            if model in self._templates:
                family = dataclasses.replace(family, template=self._templates[model])
            check_family_tokens(rank_file, family, _tiktoken_key(model))
        self._cache: dict[str, ModelText] = {}
        self._failed: set[str] = set()
        self._lock = threading.Lock()

    def family_name(self, model: str, warn: bool = True) -> str:
        """The family ``model`` is templated and tokenized as; ``warn``: log it once when
        none matches and the default is taken (not for a model that does not generate
        text, which needs no chat family)."""
        explicit = self._cfg.families.get(model)
        if explicit:
            return explicit
        folder = self._folders.get(model)
        for name in (model, *_folder_names(folder)):
            try:
                return family_for_model(name, self._families).name
            except UnknownFamily:
                pass
        default = self._cfg.default_family
        if warn and model not in self._fell_back and len(self._fell_back) < _MAX_WARNED:
            self._fell_back.add(model)
            log.warning(
                "model %s matches no known model family: it gets the default family %s "
                "(its chat template, tokenizer and stop tokens); name its family in "
                "[model] families if that is wrong",
                model,
                default,
            )
        return default

    def get(self, model: str, chat: bool = True) -> ModelText:
        """The model's text assets; may take a second on first use (loads a tokenizer).
        ``chat``: the model generates text (a family that fits matters: see family_name)."""
        hit = self._cache.get(model)
        if hit is not None:
            return hit
        with self._lock:
            hit = self._cache.get(model)
            if hit is not None:
                return hit
            try:
                name = self.family_name(model, warn=chat)
                family = self._with_parsers(model, self._families[name])
                tokenizer, family = self._tokenizer(model, family)
                if model in self._templates:
                    family = dataclasses.replace(family, template=self._templates[model])
                table = getattr(tokenizer, "token_table", None)
                if callable(table):
                    table()  # build the detokenizer's table now, not on a request
            except Exception as exc:
                self._failed.add(model)
                log.error("no tokenizer/template for model %s: %s", model, exc)
                raise NeutrinoError(
                    ErrorKind.INTERNAL, f"the tokenizer for {model!r} is not available"
                ) from None
            folder = self._folders.get(model)
            stop_ids = set(folder.eos_token_ids) if folder is not None else set()
            for tok in family.stop_tokens:
                tid = tokenizer.token_to_id(tok)
                if tid is not None:
                    stop_ids.add(tid)
            bos = (
                tokenizer.token_to_id(family.bos_token)
                if family.bos_token and family.add_bos_token
                else None
            )
            text = ModelText(
                name=model,
                family=family,
                template=ChatTemplate(family),
                tokenizer=tokenizer,
                stop_token_ids=frozenset(stop_ids),
                bos_token_id=bos,
                defaults=dict(folder.defaults) if folder is not None else {},
            )
            self._cache[model] = text
            return text

    def _tokenizer(self, model: str, family: ModelFamily) -> tuple[Tokenizer, ModelFamily]:
        """``model``'s tokenizer, and ``family`` as its own tokenizer files amend it."""
        rank_file = self._cfg.tiktoken.get(model)
        if rank_file is not None:  # a bare rank file, checked at load and in __init__
            return tiktoken_file_tokenizer(model, rank_file, _tiktoken_key(model)), family
        local = self._cfg.tokenizers.get(model)
        if local is None and model in self._folders:
            local = str(self._folders[model].path)
        if local is None:
            return load_tokenizer(family.tokenizer), family
        loaded = load_local_tokenizer(model, local)  # the family's tokenizer is not used
        return loaded.tokenizer, loaded.apply_to(family)

    def _read_template(self, model: str, path: str) -> str:
        """The chat template file configured for ``model``, read and compiled at start-up."""
        try:
            text = read_chat_template(path)
        except (OSError, ValueError) as exc:  # ValueError: not UTF-8
            what = exc.strerror if isinstance(exc, OSError) else exc
            raise ValueError(f"model {model!r}: chat template {path}: {what}") from None
        return self._compiled(model, text, path)

    def _compiled(self, model: str, text: str, where: str) -> str:
        """``text``, once it compiles as ``model``'s chat template (at start-up)."""
        try:
            family = self._families[self.family_name(model)]
            ChatTemplate(dataclasses.replace(family, template=text))
        except ValueError as exc:  # TemplateError: bad Jinja
            raise ValueError(f"model {model!r}: chat template {where}: {exc}") from None
        return text

    @staticmethod
    def _read_folder(model: str, path: str) -> ModelFolder:
        try:
            return read_model_folder(path)
        except (OSError, ValueError) as exc:
            raise ValueError(f"model {model!r}: [model] models: {exc}") from None

    def _log_folder(self, model: str, folder: ModelFolder) -> None:
        """Say once what the folder gave ``model`` and from which file."""
        taken = ", ".join(f"{what} from {where}" for what, where in folder.sources().items())
        log.info(
            "model %s is served from %s: family %s; %s; sampling defaults %s",
            model, folder.path, self.family_name(model, warn=False), taken,
            dict(folder.defaults) or "none",
        )  # fmt: skip

    def card(self, model: str) -> dict[str, object] | None:
        """What a model served from its folder was given, for its /v1/models entry."""
        folder = self._folders.get(model)
        if folder is None:
            return None
        family = self._with_parsers(model, self._families[self.family_name(model, warn=False)])
        return {
            "folder": str(folder.path),
            "family": family.name,
            "tool_parser": family.tool_parser,
            "reasoning_parser": family.reasoning_parser,
            "context_length": folder.context_length or None,
            "sampling_defaults": dict(folder.defaults),
            "from": folder.sources(),
        }

    def _with_parsers(self, model: str, family: ModelFamily) -> ModelFamily:
        """``family`` with the parsers configured for ``model``, if any."""
        changes: dict[str, str | None] = {}
        for field_name, chosen in (
            ("tool_parser", self._cfg.tool_parsers.get(model)),
            ("reasoning_parser", self._cfg.reasoning_parsers.get(model)),
        ):
            if chosen is not None:
                changes[field_name] = None if chosen == "none" else chosen
        return dataclasses.replace(family, **changes) if changes else family  # type: ignore[arg-type]

    def cached(self, model: str) -> ModelText | None:
        return self._cache.get(model)

    def settled(self, model: str) -> bool:
        """True once loading ``model``'s assets has finished, well or not."""
        return model in self._cache or model in self._failed


def _folder_names(folder: ModelFolder | None) -> tuple[str, ...]:
    """The names a folder's config.json gives its model, to match a family with."""
    if folder is None:
        return ()
    return tuple(n for n in (folder.model_type, *folder.architectures) if n)
