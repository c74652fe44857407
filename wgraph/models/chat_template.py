"""Chat templates (Jinja, from tokenizer_config.json, chat_template.jinja or a GGUF file's tokenizer.chat_template)
rendered as transformers renders them (utils/chat_template_utils.py): a sandbox with trim_blocks and lstrip_blocks,
the loopcontrols extension and the `generation` tag, `raise_exception`, `strftime_now`, a `tojson` that keeps
non-ASCII, reasoning fields aliased as transformers aliases them, and the tokenizer's
special tokens as variables. The sandbox (`chat_sandbox.BoundedEnvironment`) keeps a template from reaching Python
internals, since a template file is data, never code, and bounds its work: sizes of what it makes and the render's
time; anything a template raises is a ChatTemplateError (CheckpointError at load) naming the template."""

from __future__ import annotations

import json
import re
import time
from datetime import datetime

import jinja2
import jinja2.ext

from wgraph.errors import ChatTemplateError, CheckpointError
from wgraph.models import chat_sandbox
from wgraph.models.chat_sandbox import BoundedEnvironment, RangeBudget, bounded_filter, settable
from wgraph.models.config_values import shown

MAX_TEMPLATE_CHARS = 1 << 20
MAX_STRFTIME_CHARS = 256


def _raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def _tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


_STRFTIME_WIDTH = re.compile(r"%[-_^#0]*[1-9]")   # glibc's field widths: '%1500c' pads to 1500 characters


def _strftime_now(fmt):
    fmt = str(fmt)
    if len(fmt) > MAX_STRFTIME_CHARS or _STRFTIME_WIDTH.search(fmt):
        raise jinja2.exceptions.SecurityError(f"strftime_now: a format of {len(fmt)} characters or with a field "
                                              f"width is more than chat templates use (at most {MAX_STRFTIME_CHARS} "
                                              f"characters, no widths)")
    return datetime.now().strftime(fmt)


class _Namespace(jinja2.utils.Namespace):
    """jinja's namespace() without underscore attributes (transformers' TemplateNamespace)."""

    def __init__(*args, **kwargs):
        self, args = args[0], args[1:]
        values = dict(*args, **kwargs)
        for name, value in values.items():
            _Namespace._check(name)
            settable(value)
        jinja2.utils.Namespace.__init__(self, values)

    def __setitem__(self, name, value):
        _Namespace._check(name)
        jinja2.utils.Namespace.__setitem__(self, name, settable(value))

    @staticmethod
    def _check(name):
        if isinstance(name, str) and name.startswith("_"):
            raise jinja2.exceptions.SecurityError(f"chat templates cannot set underscore attributes ({name!r})")


class _Dict:
    """`dict(...)` for templates without dict's class attributes (transformers' TemplateDict)."""

    def __call__(self, *args, **kwargs):
        return dict(*args, **kwargs)

    def fromkeys(self, *args, **kwargs):
        return dict.fromkeys(*args, **kwargs)


class _Generation(jinja2.ext.Extension):
    """`{% generation %}...{% endgeneration %}`: transformers' AssistantTracker tag, which marks the assistant's text
    for its return_assistant_tokens_mask; here it renders its body as it is (a template using it was refused at
    load as an unknown tag)."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

    @staticmethod
    def _body(caller):
        return caller()


def _environment() -> BoundedEnvironment:
    env = BoundedEnvironment(trim_blocks=True, lstrip_blocks=True,
                             extensions=[jinja2.ext.loopcontrols, _Generation])
    env.filters["tojson"] = bounded_filter("tojson", _tojson)
    env.globals.update(raise_exception=_raise_exception, strftime_now=_strftime_now, namespace=_Namespace,
                       dict=_Dict())
    return env


def _plain(value, where: str):
    """Messages as plain JSON data (str, int, float, bool, None, lists and dicts of them) before a template sees
    them; anything else is refused."""
    if value is None or type(value) in (str, int, float, bool):
        return value
    if isinstance(value, dict):
        return {_plain(k, where): _plain(v, where) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v, where) for v in value]
    if isinstance(value, tuple):   # as transformers keeps it: a template shows ('a', 'b'), not ['a', 'b']
        return tuple(_plain(v, where) for v in value)
    raise ChatTemplateError(f"apply_chat_template: {where} holds a {type(value).__name__}; only JSON values "
                            f"(str, numbers, bool, None, lists, dicts) reach a template")


REASONING_FIELDS = ("reasoning_content", "thinking", "reasoning")   # transformers' names for one message's reasoning


def _reasoning_aliased(message: dict) -> dict:
    """A message's reasoning under the names templates read, as transformers 5 fills them before rendering
    (chat_template_utils._alias_reasoning_fields): the first of REASONING_FIELDS the message has becomes its
    `reasoning_content` (Qwen3's templates read it) and, unless the message has one, its `thinking` (gpt-oss's);
    without it a message's `reasoning` vanished from the prompt of a template that reads another name."""
    reasoning = next((message[k] for k in REASONING_FIELDS if message.get(k) is not None), None)
    if reasoning is None:
        return message
    return {"thinking": reasoning, **message, "reasoning_content": reasoning}


class ChatTemplate:
    """One or more named Jinja chat templates ("default" is used unless another is named, or tools are given and
    there is a "tool_use" one)."""

    def __init__(self, templates: dict[str, str], source: str):
        if not templates or not all(isinstance(k, str) and isinstance(v, str) for k, v in templates.items()):
            raise CheckpointError(f"{source}: a chat template must be a string or a list of {{name, template}}")
        env = _environment()
        self.source, self.sources, self._compiled = source, dict(templates), {}
        for name, text in templates.items():
            if len(text) > MAX_TEMPLATE_CHARS:
                raise CheckpointError(f"{source}: chat template {name!r} has {len(text)} characters; at most "
                                      f"{MAX_TEMPLATE_CHARS}")
            try:
                self._compiled[name] = env.from_string(text)
            except jinja2.TemplateSyntaxError as e:
                raise CheckpointError(f"{source}: chat template {name!r} is not valid Jinja: {e}") from None
            except Exception as e:  # noqa: BLE001 - a file's template: nesting too deep (RecursionError), ...
                raise CheckpointError(f"{source}: chat template {name!r} cannot be compiled: "
                                      f"{type(e).__name__}: {e}") from None

    @classmethod
    def from_value(cls, value, source: str) -> ChatTemplate:
        """From tokenizer_config.json's `chat_template`: a string, or a list of {"name", "template"}."""
        if isinstance(value, str):
            return cls({"default": value}, source)
        if isinstance(value, list) and all(isinstance(t, dict) and set(t) == {"name", "template"} for t in value):
            names = [t["name"] for t in value]
            if not all(isinstance(n, str) for n in names):   # a list or an object as a name was unhashable
                raise CheckpointError(f"{source}: the chat templates' names {shown(names)} must be strings")
            return cls({t["name"]: t["template"] for t in value}, source)
        if isinstance(value, dict):
            return cls(value, source)
        raise CheckpointError(f"{source}: chat_template must be a string or a list of {{name, template}}, "
                              f"got {type(value).__name__}")

    @property
    def names(self) -> list[str]:
        return list(self._compiled)

    def _default_name(self, tools: bool) -> str:
        if tools and "tool_use" in self._compiled:
            return "tool_use"
        if "default" in self._compiled:
            return "default"
        raise ChatTemplateError(f"apply_chat_template: the chat templates ({self.source}) are named {self.names}, "
                                f"none 'default': name one with template=...")

    def render(self, messages, *, add_generation_prompt: bool = True, template: str | None = None,
               special_tokens: dict | None = None, **kwargs) -> str:
        """The prompt text of `messages` (a list of {"role", "content", ...}); `kwargs` become template variables.
        The template is the one named `template`, else the one transformers' get_chat_template picks: "tool_use"
        when tools are given and there is one, else "default"; named templates without a "default" need a name."""
        name = template or self._default_name(kwargs.get("tools") is not None)
        if name not in self._compiled:
            raise ChatTemplateError(f"apply_chat_template: template={name!r} is not one of {self.names}")
        if not isinstance(add_generation_prompt, bool):
            raise ChatTemplateError(f"apply_chat_template: add_generation_prompt must be a bool, "
                                    f"got {add_generation_prompt!r}")
        if not isinstance(messages, (list, tuple)) or not all(isinstance(m, dict) for m in messages):
            raise ChatTemplateError("apply_chat_template: messages must be a list of dicts with 'role' and 'content'")
        if not messages:   # as transformers: a template would render a prompt of no turn, or index messages[0]
            raise ChatTemplateError("apply_chat_template: messages is empty; a conversation needs at least one "
                                    "message")
        # transformers drops None-valued keys (APIs send content=None) before rendering
        chat = [_reasoning_aliased(_plain({k: v for k, v in m.items() if v is not None}, f"message {i}"))
                for i, m in enumerate(messages)]
        variables = {"tools": None, "documents": None, **(special_tokens or {}),
                     **_plain(kwargs, "a template variable")}
        variables["range"] = RangeBudget()
        where = f"apply_chat_template: the chat template ({self.source}, {name!r})"
        limit, parts, size = chat_sandbox.MAX_PROMPT_CHARS, [], 0
        try:
            with chat_sandbox.render_limits() as deadline:
                for part in self._compiled[name].generate(messages=chat, add_generation_prompt=add_generation_prompt,
                                                          **variables):
                    parts.append(part)
                    size += len(part)
                    if size > limit:
                        raise ChatTemplateError(f"{where} wrote more than {limit} characters")
                    if time.monotonic() > deadline:
                        raise ChatTemplateError(f"{where} ran longer than {chat_sandbox.MAX_RENDER_SECONDS} s")
        except ChatTemplateError:
            raise
        except jinja2.TemplateError as e:
            raise ChatTemplateError(f"{where} refused the conversation: {e}") from None
        except Exception as e:  # noqa: BLE001 - the template's own arithmetic or calls (1/0, recursion, ...)
            raise ChatTemplateError(f"{where} failed: {type(e).__name__}: {e}") from None
        return "".join(parts)
