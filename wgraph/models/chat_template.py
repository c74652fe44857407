"""Chat templates (Jinja, from tokenizer_config.json, chat_template.jinja or a GGUF file's tokenizer.chat_template)
rendered as transformers renders them (utils/chat_template_utils.py): an ImmutableSandboxedEnvironment with
trim_blocks and lstrip_blocks, the loopcontrols extension, `raise_exception`, `strftime_now`, a `tojson` that keeps
non-ASCII, and the tokenizer's special tokens as variables. The sandbox keeps a template from reaching Python
internals: a template file is data, never code. It is also bounded work: powers, products, repetitions and `+`
are checked before they run (never folded at compile, where `7**999999999` hung the load), `range` has a budget
for a whole render, as has every value a template makes: a string or list that `~`, `+`, a method or a filter
would make longer than a prompt is refused before it is made (widths, counts and format specs included:
`'a'|center(10**10)` allocated 10 GB, and `{% set ns.s = ns.s ~ ns.s %}` 40 times 2^40 bytes), the output has a
size and the render a time limit (checked at each loop iteration, call, filter, operator and attribute, not only
as it writes: a loop that writes nothing ran without end), and anything a template raises is a ChatTemplateError
(CheckpointError at load) naming the template."""

from __future__ import annotations

import builtins
import functools
import json
import re
import string
import threading
import time
from datetime import datetime

import jinja2
import jinja2.ext
from jinja2 import nodes
from jinja2.compiler import CodeGenerator, optimizeconst
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.utils import _PassArg

from wgraph.errors import ChatTemplateError, CheckpointError
from wgraph.models.config_values import shown

MAX_TEMPLATE_CHARS = 1 << 20
MAX_PROMPT_CHARS = 1 << 24     # a rendered conversation
MAX_RANGE_ITEMS = 1 << 17      # range() items of one render, all calls together
MAX_RENDER_SECONDS = 10.0      # checked at each write, loop item, call, filter, operator and attribute
MAX_POWER_BITS = 4096          # an integer power's or product's result
_RENDER = threading.local()    # .deadline: the time.monotonic() the render in this thread must end by
_PRINTF_SPEC = re.compile(r"%(?:\([^)]*\))?[#0\- +]*(\*|\d+)?(?:\.(\*|\d+))?")
_DIGITS = re.compile(r"\d+")


def _refuse(what: str):
    raise jinja2.exceptions.SecurityError(what)


def _tick() -> None:
    """The render's time limit, checked wherever a template does work (not only where it writes)."""
    deadline = getattr(_RENDER, "deadline", None)
    if deadline is not None and time.monotonic() > deadline:
        _refuse(f"the render ran longer than {MAX_RENDER_SECONDS} s")


def _size(n: int, what: str) -> None:
    if n > MAX_PROMPT_CHARS:
        _refuse(f"{what} of {n} is larger than chat templates make (at most {MAX_PROMPT_CHARS})")


def _sized(value):
    """A value that may become text (written, joined, handed to a filter or a call): its strings and items, nested
    lists and dicts walked as often as they appear (`{% set ns.x = [ns.x, ns.x] %}` 40 times is 2^40 of them),
    at most MAX_PROMPT_CHARS; the walk stops there."""
    if not isinstance(value, (list, tuple, dict)):
        return value
    left, stack = MAX_PROMPT_CHARS, [value]
    while stack:
        v = stack.pop()
        n = len(v) if isinstance(v, (str, list, tuple, dict)) else 1
        left -= n
        if left < 0:
            _refuse(f"a value of more than {MAX_PROMPT_CHARS} items and characters (nested lists and dicts "
                    f"counted through) is larger than chat templates make")
        if isinstance(v, (list, tuple)):
            stack.extend(v)
        elif isinstance(v, dict):
            stack.extend(v.keys())
            stack.extend(v.values())
    return value


def _depths(value) -> int:
    """The levels of all lines of value's indented JSON, added up (the walk is bounded: _sized saw it)."""
    total, stack = 0, [(value, 0)]
    while stack:
        v, depth = stack.pop()
        total += depth
        if isinstance(v, (list, tuple, dict)) and v:
            total += depth   # the closing bracket's line
            items = list(v.values()) if isinstance(v, dict) else v
            stack.extend((x, depth + 1) for x in items)
    return total


def _made(value):
    """A value a call, filter or operator made: no longer than a prompt."""
    if isinstance(value, (str, list, tuple, dict)):
        _size(len(value), "a value")
    return value


def _width(n, what: str) -> None:
    """A width, count or fill that sizes what a call makes before it is made."""
    if isinstance(n, int) and not isinstance(n, bool):
        _size(n, what)


def _printf(fmt: str, values) -> None:
    """`fmt % values`: no width or precision larger than a prompt (written, or taken from values by '*')."""
    for m in _PRINTF_SPEC.finditer(fmt):
        for spec in m.groups():
            if spec == "*":
                for v in values if isinstance(values, tuple) else (values,):
                    _width(v, "a '*' width")
            elif spec:
                _size(int(spec), "a printf width or precision")


def _format_spec(fmt: str, args, kwargs) -> None:
    """`fmt.format(...)`: no width or precision in a spec larger than a prompt; a spec that takes its width from
    the arguments ('{:{w}}') has them checked as widths."""
    for _, field, spec, _ in string.Formatter().parse(fmt):
        if field is None or not spec:
            continue
        for digits in _DIGITS.findall(spec):
            _size(int(digits), "a format width or precision")
        if "{" in spec:
            for v in (*args, *kwargs.values()):
                _width(v, "a format width from the arguments")


def _joined(sep: str, items) -> list:
    """items (materialized) whose str()s joined by sep fit a prompt."""
    items = list(items)
    _size(sum(len(str(x)) for x in items) + len(sep) * max(len(items) - 1, 0), "a join")
    return items


def _replaced(s, old, new, count) -> None:
    s, old, new = str(s), str(old), str(new)
    n = (s.count(old) if old else len(s) + 1)
    if isinstance(count, int) and not isinstance(count, bool) and count >= 0:
        n = min(n, count)
    _size(len(s) + n * (len(new) - len(old)), "a replace")


def _str_method(obj, args, kwargs) -> None:
    """What a str method would make, from its arguments, before it runs."""
    if not isinstance(getattr(obj, "__self__", None), str):
        return
    s, name = obj.__self__, getattr(obj, "__name__", "")
    if name in ("center", "ljust", "rjust", "zfill"):
        for v in (*args, *kwargs.values()):
            _width(v, f"a {name} width")
    elif name == "expandtabs":
        for v in (*args, *kwargs.values()):
            if isinstance(v, int) and not isinstance(v, bool):
                _size(len(s) + s.count("\t") * max(v, 0), "an expandtabs")
    elif name == "replace" and len(args) >= 2:
        _replaced(s, args[0], args[1], args[2] if len(args) > 2 else kwargs.get("count", -1))
    elif name == "translate" and args and isinstance(args[0], dict):
        longest = max((len(v) for v in args[0].values() if isinstance(v, str)), default=1)
        _size(len(s) * max(longest, 1), "a translate")


def _check_filter(name: str, args: list, kwargs: dict) -> None:
    """What a filter would make, from its arguments (the filtered value first), before it runs."""
    def arg(i, key, default=None):
        return args[i] if len(args) > i else kwargs.get(key, default)

    if name == "center":
        _width(arg(1, "width"), "a center width")
    elif name == "indent":
        width = arg(1, "width")
        _width(width, "an indent width")
        if isinstance(width, str):
            _size(len(width) * (str(args[0]).count("\n") + 1) + len(str(args[0])), "an indent")
    elif name == "tojson":
        indent = arg(2, "indent")
        unit = indent if isinstance(indent, int) and not isinstance(indent, bool) else len(str(indent or ""))
        if unit:   # each item and closing bracket is a line indented `unit` per level it is nested
            _size(max(unit, 0) * _depths(args[0]), "a tojson indentation")
    elif name in ("slice", "batch"):
        n = arg(1, "slices" if name == "slice" else "linecount")
        if isinstance(n, int) and not isinstance(n, bool) and n > MAX_RANGE_ITEMS:
            _refuse(f"{name}({n}) makes more than {MAX_RANGE_ITEMS} lists")
    elif name == "format" and args:
        _printf(str(args[0]), tuple(args[1:]) or tuple(kwargs.values()))
    elif name == "replace" and len(args) >= 3:
        _replaced(args[0], args[1], args[2], arg(3, "count", -1))


def _raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def _tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _strftime_now(fmt):
    return datetime.now().strftime(fmt)


class _Namespace(jinja2.utils.Namespace):
    """jinja's namespace() without underscore attributes (transformers' TemplateNamespace)."""

    def __init__(*args, **kwargs):
        self, args = args[0], args[1:]
        values = dict(*args, **kwargs)
        for name in values:
            _Namespace._check(name)
        jinja2.utils.Namespace.__init__(self, values)

    def __setitem__(self, name, value):
        _Namespace._check(name)
        jinja2.utils.Namespace.__setitem__(self, name, value)

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


class _Generator(CodeGenerator):
    """jinja's code generator with each `for` loop's items counted against the render's time limit (a loop whose
    body writes nothing and calls nothing checked nothing) and `~` joined through the size check."""

    def visit_Template(self, node, frame=None):
        for loop in node.find_all(nodes.For):
            loop.iter = nodes.Filter(loop.iter, "wgraph.steps", [], [], None, None, lineno=loop.lineno)
        super().visit_Template(node, frame)

    @optimizeconst
    def visit_Concat(self, node, frame):
        if frame.eval_ctx.volatile:
            join = "(markup_join if context.eval_ctx.volatile else str_join)"
        else:
            join = "markup_join" if frame.eval_ctx.autoescape else "str_join"
        self.write(f"environment.wgraph_concat({join}, (")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write("))")


def _written(value):
    """What `{{ ... }}` writes, before it is made text."""
    _tick()
    return _sized(value)


def _steps(items):
    """A `for` loop's items, each a tick of the render's time limit."""
    for item in items:
        _tick()
        yield item


def _bounded_filter(name: str, f):
    """A filter that ticks the time limit, checks what it would make before and what it made after."""
    skip = 1 if _PassArg.from_obj(f) is not None else 0

    @functools.wraps(f)
    def run(*args, **kwargs):
        _tick()
        args = list(args)
        if name == "join" and len(args) > skip:   # an iterator is read once: check the items, join those
            sep = args[skip + 1] if len(args) > skip + 1 else kwargs.get("d", "")
            args[skip] = _joined(str(sep), args[skip])
        for v in (*args[skip:], *kwargs.values()):
            _sized(v)
        _check_filter(name, args[skip:], kwargs)
        return _made(f(*args, **kwargs))
    return run


def _lipsum(n=5, html=True, min=20, max=100):  # noqa: A002 - jinja's names
    for v in (n, min, max):
        _width(v, "a lipsum count")
    if all(isinstance(v, int) for v in (n, min, max)) and n * builtins.max(min, max, 1) > MAX_RANGE_ITEMS:
        _refuse(f"lipsum(n={n}, max={max}) makes more than {MAX_RANGE_ITEMS} words")
    return jinja2.utils.generate_lorem_ipsum(n=n, html=html, min=min, max=max)


class _Bounded(ImmutableSandboxedEnvironment):
    """The sandbox with `**`, `*`, `+` and `%` checked before they run (intercepted operators are never
    constant-folded at compile time either): a power's or product's result at most MAX_POWER_BITS bits, a repeated
    or concatenated string or list, or a printf width, at most MAX_PROMPT_CHARS items; every call, filter, `~`,
    attribute and loop item ticks the render's time limit, and what a call or filter makes is checked (see
    _str_method, _check_filter, _made)."""

    intercepted_binops = frozenset({"**", "*", "+", "%"})
    code_generator_class = _Generator

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.filters["tojson"] = _tojson
        self.filters = {name: _bounded_filter(name, f) for name, f in self.filters.items()}
        self.filters["wgraph.steps"] = _steps   # no template can name it: it is not an identifier
        self.globals["lipsum"] = _lipsum

    @staticmethod
    def concat(parts):
        """The text of a macro, a {% set %} block or a call block: sized before it is joined."""
        parts = list(parts)
        _size(sum(len(p) for p in parts), "a block's text")
        return "".join(parts)

    @staticmethod
    def wgraph_concat(join, values):
        _tick()
        for v in values:
            _sized(v)
        _size(sum(len(str(v)) for v in values), "a '~' concatenation")
        return join(values)

    def getattr(self, obj, attribute):
        _tick()
        return super().getattr(obj, attribute)

    def getitem(self, obj, argument):
        _tick()
        return super().getitem(obj, argument)

    def call(__self, __context, __obj, *args, **kwargs):  # noqa: N805 - jinja's signature
        _tick()
        for v in (*args, *kwargs.values()):
            _sized(v)
        _str_method(__obj, args, kwargs)
        return _made(super().call(__context, __obj, *args, **kwargs))

    def wrap_str_format(self, value):
        wrapper = super().wrap_str_format(value)
        if wrapper is None:
            return None
        fmt, is_map = value.__self__, value.__name__ == "format_map"

        @functools.wraps(wrapper)
        def checked(*args, **kwargs):
            if is_map:
                _format_spec(fmt, (), args[0] if args and isinstance(args[0], dict) else {})
            else:
                _format_spec(fmt, args, kwargs)
            return _made(wrapper(*args, **kwargs))
        return checked

    def call_binop(self, context, operator, left, right):
        _tick()
        if operator == "+" and isinstance(left, (str, list, tuple)) and isinstance(right, (str, list, tuple)):
            _size(len(left) + len(right), "a '+' concatenation")
        if operator == "%" and isinstance(left, str):
            _printf(left, _sized(right))
        if operator == "*" and all(isinstance(v, int) and not isinstance(v, bool) for v in (left, right)) and (
                left.bit_length() + right.bit_length() > MAX_POWER_BITS + 1):
            _refuse(f"a product of {left.bit_length()}-bit and {right.bit_length()}-bit integers is larger than "
                    f"chat templates compute")
        if operator == "**" and isinstance(left, int) and isinstance(right, int) and abs(left) > 1 and (
                right > MAX_POWER_BITS or right * max(abs(left), 2).bit_length() > MAX_POWER_BITS):
            raise jinja2.exceptions.SecurityError(f"{left} ** {right} is larger than chat templates compute")
        if operator == "*":
            for seq, n in ((left, right), (right, left)):
                if isinstance(seq, (str, list, tuple)) and isinstance(n, int) and len(seq) * n > MAX_PROMPT_CHARS:
                    raise jinja2.exceptions.SecurityError(f"a repetition of {len(seq) * n} items is longer than "
                                                          f"chat templates make")
        return _made(super().call_binop(context, operator, left, right))


class _RangeBudget:
    """range() for one render: at most MAX_RANGE_ITEMS items in all its calls (jinja's sandbox caps one call)."""

    def __init__(self):
        self.left = MAX_RANGE_ITEMS

    def __call__(self, *args):
        r = range(*args)
        self.left -= len(r)
        if self.left < 0:
            raise jinja2.exceptions.SecurityError(f"range() made more than {MAX_RANGE_ITEMS} items in one render")
        return r


def _environment() -> ImmutableSandboxedEnvironment:
    env = _Bounded(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols], finalize=_written)
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
    if isinstance(value, (list, tuple)):
        return [_plain(v, where) for v in value]
    raise ChatTemplateError(f"apply_chat_template: {where} holds a {type(value).__name__}; only JSON values "
                            f"(str, numbers, bool, None, lists, dicts) reach a template")


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
        chat = [_plain({k: v for k, v in m.items() if v is not None}, f"message {i}") for i, m in enumerate(messages)]
        variables = {"tools": None, "documents": None, **(special_tokens or {}), **_plain(kwargs, "a template variable")}
        variables["range"] = _RangeBudget()
        where = f"apply_chat_template: the chat template ({self.source}, {name!r})"
        parts, size, deadline = [], 0, time.monotonic() + MAX_RENDER_SECONDS
        _RENDER.deadline = deadline
        try:
            for part in self._compiled[name].generate(messages=chat, add_generation_prompt=add_generation_prompt,
                                                      **variables):
                parts.append(part)
                size += len(part)
                if size > MAX_PROMPT_CHARS:
                    raise ChatTemplateError(f"{where} wrote more than {MAX_PROMPT_CHARS} characters")
                if time.monotonic() > deadline:
                    raise ChatTemplateError(f"{where} ran longer than {MAX_RENDER_SECONDS} s")
        except ChatTemplateError:
            raise
        except jinja2.TemplateError as e:
            raise ChatTemplateError(f"{where} refused the conversation: {e}") from None
        except Exception as e:  # noqa: BLE001 - the template's own arithmetic or calls (1/0, recursion, ...)
            raise ChatTemplateError(f"{where} failed: {type(e).__name__}: {e}") from None
        finally:
            _RENDER.deadline = None
        return "".join(parts)
