"""Qwen2-VL and Qwen2.5-VL: the published template, image parts as the template sees them,
and the two tokenizers (Qwen2.5's, and Qwen2-VL's with fewer added tokens)."""

from __future__ import annotations

import copy
import hashlib
import json
from typing import Any

import pytest
from jinja2.sandbox import ImmutableSandboxedEnvironment

from neutrino.pipeline.chat import ImagePart, Message, Part, TextPart, template_messages
from neutrino.pipeline.prompt import family_image
from neutrino.text.chat_messages import normalize_messages
from neutrino.text.families import ModelFamily
from neutrino.text.registry import load_tokenizer
from neutrino.text.templates import ChatTemplate, TemplateError, family_for_model, load_families

from .test_templates import reference_render

FAMILIES = load_families()
VL = ("qwen2.5-vl", "qwen2-vl")
IMAGE_URL = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
VISION = "<|vision_start|><|image_pad|><|vision_end|>"


def images_for_template(
    messages: list[dict[str, Any]], family: ModelFamily
) -> list[dict[str, object]]:
    """What the server renders for these OpenAI-style messages: typed turns (each
    image_url part the next of the request's images) as the family's template reads them
    (pipeline.prompt: its image part, or its placeholder in a text part)."""
    typed, images = [], 0
    for m in messages:
        content = m["content"]
        if isinstance(content, list):
            parts: list[Part] = []
            for p in content:
                if p["type"] == "image_url":
                    parts.append(ImagePart(images))
                    images += 1
                else:
                    parts.append(TextPart(p["text"]))
            content = tuple(parts)
        typed.append(Message(m["role"], content))
    return template_messages(typed, family_image(family))


def _request(*parts: Any, system: str | None = None) -> list[dict[str, Any]]:
    """An OpenAI-style chat request: ``str`` parts are text parts, ``None`` an image part."""
    content = [IMAGE_URL if p is None else {"type": "text", "text": p} for p in parts]
    head = [] if system is None else [{"role": "system", "content": system}]
    return [*head, {"role": "user", "content": content}]


def _jinja2(template: str, messages: Any, **context: Any) -> str:
    """The template rendered by jinja2 as transformers sets it up, on messages as given."""
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    return env.from_string(template).render(messages=messages, **context)


def test_both_families_carry_the_same_published_template() -> None:
    qwen25, qwen2 = FAMILIES["qwen2.5-vl"], FAMILIES["qwen2-vl"]
    assert qwen25.template == qwen2.template
    # A public renderer-validation record of Qwen/Qwen2.5-VL-7B-Instruct (revision cc594898)
    # gives the SHA-256 of the official chat template serialised as a JSON string.
    digest = hashlib.sha256(json.dumps(qwen25.template).encode()).hexdigest()
    assert digest == "4df95d05455c2a6f762616492bba63d0f9bef904ef47daabad35f5715d6d2e4e"
    for family in (qwen25, qwen2):
        assert family.renders_images and family.eos_token == "<|im_end|>"
        assert family.stop_tokens == ("<|im_end|>", "<|endoftext|>")
    assert (qwen25.tokenizer, qwen2.tokenizer) == ("qwen2", "qwen2-vl")
    assert (qwen25.tool_parser, qwen2.tool_parser) == ("hermes", None)
    assert "tools" not in qwen25.template  # a request's tools never reach the prompt


@pytest.mark.parametrize("name", VL)
def test_model_card_prompt(name: str) -> None:
    """The prompt Qwen2-VL's model card gives for one image and a question."""
    messages = [{"role": "user", "content": [{"type": "image"}, "Describe this image."]}]
    text = ChatTemplate(FAMILIES[name]).render(messages)
    assert text == (
        "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n"
        f"{VISION}Describe this image.<|im_end|>\n<|im_start|>assistant\n"
    )


@pytest.mark.parametrize("name", VL)
@pytest.mark.parametrize("vision_id", [False, True])
@pytest.mark.parametrize(
    "messages",
    [
        _request(None, "What is in this picture?"),
        _request("Compare ", None, " and ", None, "."),
        _request(None, system="  Be terse.\n"),
        [
            *_request(None, "A cat?"),
            {"role": "assistant", "content": "Yes."},
            *_request("And this?", None),
        ],
    ],
    ids=["one", "two-in-text", "system-image-only", "two-turns"],
)
def test_request_images_render_as_transformers_renders_them(
    name: str, vision_id: bool, messages: list[dict[str, Any]]
) -> None:
    """What the server does with image_url parts gives the prompt jinja2 renders for the
    request's messages as the client sent them (the template reads image_url parts too)."""
    family = FAMILIES[name]
    before = copy.deepcopy(messages)
    template_input = images_for_template(messages, family)
    assert messages == before
    ours = ChatTemplate(family).render(template_input, add_vision_id=vision_id)
    as_sent = _jinja2(
        family.template, messages, add_generation_prompt=True, add_vision_id=vision_id
    )
    as_image_parts = reference_render(
        family, template_input, add_generation_prompt=True, tools=None, add_vision_id=vision_id
    )
    assert ours == as_sent == as_image_parts
    images = sum(p is IMAGE_URL for m in messages for p in m["content"])
    assert ours.count(VISION) == images
    assert ours.count("Picture ") == (images if vision_id else 0)
    if vision_id:
        assert f"Picture {images}: {VISION}" in ours


def test_vision_ids_count_across_messages() -> None:
    messages = [*_request(None), {"role": "assistant", "content": "ok"}, *_request(None, None)]
    text = ChatTemplate(FAMILIES["qwen2.5-vl"]).render(
        images_for_template(messages, FAMILIES["qwen2.5-vl"]), add_vision_id=True
    )
    assert [text.count(f"Picture {n}: {VISION}") for n in (1, 2, 3)] == [1, 1, 1]


def test_text_only_families_still_get_the_placeholder_text() -> None:
    family = FAMILIES["qwen2.5"]
    assert not family.renders_images
    messages = images_for_template(_request(None, "Hi"), family)
    content = messages[0]["content"]
    assert isinstance(content, list)
    assert content[0] == {"type": "text", "text": family.image_placeholder}
    assert f"user\n{VISION}Hi<|im_end|>" in ChatTemplate(family).render(messages)


def test_image_parts_reach_only_templates_that_render_them() -> None:
    parts = [{"type": "image"}, {"type": "text", "text": "a"}, "b"]
    kept = normalize_messages([{"role": "user", "content": parts}], image_parts=True)
    assert kept[0]["content"] == [
        {"type": "image"},
        {"type": "text", "text": "a"},
        {"type": "text", "text": "b"},
    ]
    text_only = [{"role": "user", "content": [{"type": "text", "text": "a"}, "b"]}]
    assert normalize_messages(text_only, image_parts=True)[0]["content"] == "ab"
    with pytest.raises(TemplateError, match="'image'"):
        normalize_messages([{"role": "user", "content": parts}])
    with pytest.raises(TemplateError, match="'image'"):
        ChatTemplate(FAMILIES["qwen2.5"]).render([{"role": "user", "content": parts}])


@pytest.mark.parametrize(
    ("model", "family"),
    [
        ("Qwen/Qwen2.5-VL-7B-Instruct", "qwen2.5-vl"),
        ("Qwen/Qwen2.5-VL-72B-Instruct-AWQ", "qwen2.5-vl"),
        ("qwen2_5_vl-3b", "qwen2.5-vl"),
        ("Qwen/Qwen2-VL-7B-Instruct", "qwen2-vl"),
        ("Qwen/Qwen2-VL-2B-Instruct-GPTQ-Int8", "qwen2-vl"),
        ("Qwen/Qwen2.5-7B-Instruct", "qwen2.5"),
    ],
)
def test_model_names(model: str, family: str) -> None:
    assert family_for_model(model, FAMILIES).name == family


# ------------------------------------------------------------------------------ tokenizers


def test_qwen25_vl_ids_recorded_from_its_published_tokenizer() -> None:
    """Qwen2.5-VL-7B-Instruct's processor, as printed publicly, encodes this text to these ids
    (and lists the same 22 added tokens as Qwen2.5, 151643-151664)."""
    assert load_tokenizer("qwen2").encode("描述这张图片的内容。") == [
        53481,
        108893,
        45930,
        104597,
        1773,
    ]


def test_qwen2_vl_has_only_the_fourteen_special_added_tokens() -> None:
    qwen2_vl, qwen2 = load_tokenizer("qwen2-vl"), load_tokenizer("qwen2")
    assert (qwen2_vl.vocab_size, qwen2.vocab_size) == (151657, 151665)
    for token_id in range(151643, 151657):
        text = qwen2.token_bytes(token_id).decode()
        assert qwen2_vl.token_to_id(text) == token_id and qwen2_vl.is_special(token_id)
    for text in ("<tool_call>", "</tool_call>", "<|fim_prefix|>", "<|file_sep|>"):
        assert qwen2_vl.token_to_id(text) is None
        assert len(qwen2_vl.encode(text)) > 1
        assert qwen2_vl.decode(qwen2_vl.encode(text)) == text


def test_template_prompts_tokenize_the_same_with_both_tokenizers() -> None:
    """The template writes only tokens both vocabularies share, at the same ids."""
    messages = [
        {"role": "system", "content": "Grüße 👋"},
        *_request(None, "Was ist das?", None),
        {"role": "assistant", "content": "Zwei Bilder."},
    ]
    family = FAMILIES["qwen2-vl"]
    text = ChatTemplate(family).render(images_for_template(messages, family), add_vision_id=True)
    ids = load_tokenizer("qwen2-vl").encode_prompt(text)
    assert ids == load_tokenizer("qwen2").encode_prompt(text)
    assert ids.count(151655) == 2 and ids.count(151652) == 2 and ids.count(151653) == 2
