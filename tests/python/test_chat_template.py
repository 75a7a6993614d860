"""Native chat rendering (src/generate/chat_template.cpp, dinoml.llm.render_chat) against jinja2
rendering the same templates the way Hugging Face does (sandboxed, trim_blocks, lstrip_blocks,
raise_exception): the canonical ChatML, Llama-3 and Gemma templates, and the real templates that
the vocabularies of scripts/fetch-vocabs carry (Qwen3: ChatML, Llama-3, Gemma 3)."""
import os

import pytest

jinja2 = pytest.importorskip("jinja2")
from jinja2.sandbox import ImmutableSandboxedEnvironment  # noqa: E402

from dinoml.llm import detect_chat_format, render_chat  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CHATML = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + "
          "'\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")
LLAMA3 = ("{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + "
          "message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}"
          "{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}"
          "{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}")
GEMMA = ("{{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}"
         "{% endif %}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
         "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
         "{% if (message['role'] == 'assistant') %}{% set role = 'model' %}{% else %}{% set role = message['role'] %}"
         "{% endif %}{{ '<start_of_turn>' + role + '\n' + message['content'] | trim + '<end_of_turn>\n' }}{% endfor %}"
         "{% if add_generation_prompt %}{{'<start_of_turn>model\n'}}{% endif %}")

CHATS = [
    [("user", "Hello!")],
    [("user", "  What is 2+2?\n\n "), ("assistant", " 4. \n"), ("user", "And 3+3?")],
    [("system", "You are terse."), ("user", "Name a prime.")],
    [("system", "Be kind.\n"), ("user", "多语言 ok? 😀"), ("assistant", "Yes — sí."), ("user", "code:\n```py\nx = 1\n```")],
]


def jinja(template, messages, bos, add_generation_prompt=True):
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)

    def raise_exception(msg):
        raise jinja2.exceptions.TemplateError(msg)
    env.globals["raise_exception"] = raise_exception
    return env.from_string(template).render(messages=[{"role": r, "content": c} for r, c in messages], bos_token=bos,
                                            eos_token="", add_generation_prompt=add_generation_prompt)


@pytest.mark.parametrize("template, fmt, bos, system_ok", [(CHATML, "chatml", "", True), (LLAMA3, "llama3", "<|begin_of_text|>", True),
                                                          (GEMMA, "gemma", "<bos>", False)])
def test_canonical_templates(template, fmt, bos, system_ok):
    assert detect_chat_format(template) == fmt
    for chat in CHATS:
        if chat[0][0] == "system" and not system_ok:
            continue
        for gen in (True, False):
            assert render_chat(fmt, chat, gen, bos) == jinja(template, chat, bos, gen), (fmt, chat, gen)


@pytest.mark.parametrize("name, fmt", [("qwen3", "chatml"), ("llama3", "llama3"), ("gemma3", "gemma")])
def test_real_templates(name, fmt, vocab_dir):
    import dinoml as dml
    tok = dml.Tokenizer.from_gguf(os.path.join(vocab_dir, f"{name}.gguf"))
    assert detect_chat_format(tok.chat_template) == fmt
    bos = tok.token_text(tok.bos) if tok.bos is not None else ""
    for chat in CHATS:
        assert render_chat(fmt, chat, True, bos) == jinja(tok.chat_template, chat, bos, True), (name, chat)


def test_unknown_template_and_roles():
    with pytest.raises(ValueError, match="--chat-template chatml\\|llama3\\|gemma"):
        detect_chat_format("{% for m in messages %}[INST] {{ m['content'] }} [/INST]{% endfor %}")
    with pytest.raises(ValueError, match="no chat template"):
        detect_chat_format("")
    with pytest.raises(ValueError, match="role 'tool'"):
        render_chat("chatml", [("tool", "x")])
    with pytest.raises(ValueError, match="alternate"):
        render_chat("gemma", [("user", "a"), ("user", "b")])
    with pytest.raises(ValueError, match="unknown chat template 'vicuna'"):
        render_chat("vicuna", [("user", "a")])
