"""The Jinja sandbox chat templates render in (`BoundedEnvironment`): jinja's ImmutableSandboxedEnvironment, which
keeps a template from reaching Python internals, made bounded work, since a template file is data from outside.
Powers, products, repetitions and `+` are checked before they run (never folded at compile, where `7**999999999`
hung the load), `range` has a budget for a whole render (`RangeBudget`), as has every value a template makes: a
string or list that `~`, `+`, `%`, a method or a filter would make longer than a prompt is refused before it is made
(widths, counts, format specs and repeated fields included: `'a'|center(10**10)` allocated 10 GB, `{% set ns.s =
ns.s ~ ns.s %}` 40 times 2^40 bytes, `s.join(l)` and `('{0}' * n).format(s)` len(s) times n), and the render has a
time limit and a budget of all it makes (`render_limits`: many values, each within the limit, held at once or
made over and over in a recursion), the time checked at each loop iteration, call, filter, operator and attribute,
not only as it writes: a loop that writes nothing ran without end. A refusal is a jinja SecurityError naming what
and how large."""

from __future__ import annotations

import builtins
import contextlib
import functools
import operator
import re
import threading
import time
import types
from collections import Counter
from collections.abc import Mapping

import attrs
import jinja2
from jinja2 import nodes
from jinja2.compiler import CodeGenerator, optimizeconst
from jinja2.sandbox import ImmutableSandboxedEnvironment, SandboxedEscapeFormatter, SandboxedFormatter
from jinja2.utils import _PassArg
from markupsafe import Markup

MAX_PROMPT_CHARS = 1 << 24     # a rendered conversation, and any value a template makes
MAX_RANGE_ITEMS = 1 << 17      # range() items of one render, all calls together
MAX_RENDER_SECONDS = 10.0      # checked at each write, loop item, call, filter, operator and attribute
MAX_RENDER_MADE = 8 * MAX_PROMPT_CHARS   # the characters and items of every value one render makes, added up
MAX_SCAN = 1 << 26             # len(s) x len(chars) of a strip, (len(s) - len(sep)) x len(sep) of a reverse search
MAX_ORDERED_ITEMS = 1 << 17    # items sort, dictsort, groupby, unique, min and max order in one call
MAX_POWER_BITS = 4096          # an integer power's, product's, sum's or int filter's result
MAX_ROUND_DIGITS = 400         # round's precision (a float has 17 significant digits, exponents to 10^+-324)
_RENDER = threading.local()    # .deadline: the time.monotonic() the render in this thread must end by; .left: of
                               # MAX_RENDER_MADE
_DIGITS = re.compile(r"\d+")
_PRINTF_FLAGS = "#0- +"


def _refuse(what: str):
    raise jinja2.exceptions.SecurityError(what)


@contextlib.contextmanager
def render_limits():
    """The time limit and the budget of what it makes of one render in this thread, from now; yields the
    time.monotonic() it ends at."""
    deadline = time.monotonic() + MAX_RENDER_SECONDS
    _RENDER.deadline, _RENDER.left = deadline, MAX_RENDER_MADE
    try:
        yield deadline
    finally:
        _RENDER.deadline = _RENDER.left = None


def _charge(n: int) -> None:
    """n characters or items made, against the render's budget (each value alone is within a prompt, but sixty of
    them in sixty variables, or a slice a recursion level, held gigabytes)."""
    left = getattr(_RENDER, "left", None)
    if left is not None:
        _RENDER.left = left - n
        if _RENDER.left < 0:
            _refuse(f"the render made more than {MAX_RENDER_MADE} characters and items in all")


def _tick() -> None:
    """The render's time limit, checked wherever a template does work (not only where it writes)."""
    deadline = getattr(_RENDER, "deadline", None)
    if deadline is not None and time.monotonic() > deadline:
        _refuse(f"the render ran longer than {MAX_RENDER_SECONDS} s")


def _size(n: int, what: str) -> None:
    if n > MAX_PROMPT_CHARS:
        _refuse(f"{what} of {n} is larger than chat templates make (at most {MAX_PROMPT_CHARS})")


_VIEWS = (type({}.keys()), type({}.values()), type({}.items()))
_BYTES_METHODS = frozenset({"encode", "to_bytes"})   # str.encode, int.to_bytes: templates make text, not bytes
_ORDERING = frozenset({"sort", "dictsort", "groupby", "unique", "min", "max"})   # one uninterrupted C sort
_UNBOUNDED_FILTERS = {   # jinja filters whose work their input's size does not bound: not offered
    "pprint": "indents a dict's values by its keys' width and re-reads each nested level",
    "wordwrap": "copies the rest of a long word for each line it breaks (quadratic)",
    "urlize": "scans each word with a backtracking pattern (quadratic)",
}
_CONTAINERS = (list, tuple, dict, *_VIEWS, jinja2.utils.Namespace)


def _parts(v) -> list:
    """What container v's text shows of other values: a list's or tuple's items, a dict's (or a dict view's) keys
    and values, a namespace's attributes (its repr is its dict's)."""
    if isinstance(v, dict):
        return [*v.keys(), *v.values()]
    if isinstance(v, jinja2.utils.Namespace):
        return [v._Namespace__attrs]
    return list(v)


@attrs.frozen
class _Measure:
    """What a value holds, counted through every list, dict and namespace in it as often as it appears.
    items: its text's length as str() writes it, near enough: its strings' characters, its numbers' digits (an int
    a digit per 3 bits, a float 24: repr's most), 5 for True / None, its containers' lengths (a namespace 1);
    text: at least len(repr()) of it (a character of a string may take 10, '\\U000e0001'; a float 320, %f of 1e308;
    a container 20 and 4 an item more); lines / depths: its lines as indented JSON (an item each, a dict's key on
    its value's line, and a nonempty container's closing bracket) and their levels added up, the value at level 0."""

    items: int = 0
    text: int = 0
    lines: int = 0
    depths: int = 0
    spaces: int = 0   # namespaces in it

    def __add__(self, other: _Measure) -> _Measure:
        return _Measure(self.items + other.items, self.text + other.text, self.lines + other.lines,
                        self.depths + other.depths, self.spaces + other.spaces)

    def times(self, n: int) -> _Measure:
        return _Measure(self.items * n, self.text * n, self.lines * n, self.depths * n, self.spaces * n)


_FIXED = {type(None): (5, 5), bool: (5, 5), float: (24, 320)}   # a scalar's (items, text) whatever its value
_SCALARS = frozenset({str, int, *_FIXED})


def _leaves(parts: list, kinds: set) -> _Measure:
    """The _Measure of parts, values that hold no others (`kinds`: their types), each one level below their
    container; strings, ints and fixed-size scalars counted without a Python loop where they are all one kind."""
    n = len(parts)
    if kinds <= {str}:
        items = sum(map(len, parts))
        return _Measure(items, 10 * items + 2 * n, n, n)
    if kinds <= {int}:
        digits = sum(map(int.bit_length, parts)) // 3 + n
        return _Measure(digits, digits + 3 * n, n, n)
    if len(kinds) == 1 and next(iter(kinds)) in _FIXED:
        items, text = _FIXED[next(iter(kinds))]
        return _Measure(items * n, text * n, n, n)
    items = text = 0
    for i, c in enumerate(parts):
        if i % 65536 == 65535:
            _tick()
        if isinstance(c, str):
            items += len(c)
            text += 10 * len(c) + 2
        elif type(c) in _FIXED:
            items += _FIXED[type(c)][0]
            text += _FIXED[type(c)][1]
        elif isinstance(c, int):
            items += c.bit_length() // 3 + 1
            text += c.bit_length() // 3 + 4
        else:
            r = len(repr(c))
            items += r
            text += r
    return _Measure(items, text, n, n)


def _measure(value) -> _Measure:
    """value's _Measure (a container's), refused past MAX_PROMPT_CHARS items (a namespace that holds itself: at
    once). Each list, dict or namespace is walked once however often it appears (`{% set ns.x = [ns.x, ns.x] %}`
    40 times is 2^40 items in 41 lists; `[[]] * 2^24` one inner list, counted 2^24 times), and the walk ticks the
    time limit."""
    _tick()
    measured, open_parts, stack, steps = {}, {}, [(value, False)], 0
    while stack:
        v, done = stack.pop()
        key = id(v)
        if not done:
            if key in measured:
                continue
            if key in open_parts:   # a cycle: settable keeps namespaces out of namespaces, so none is made; the
                _refuse("a value that holds itself is larger than chat templates make")   # walk must not loop
            steps += 1
            if steps % 1024 == 0:
                _tick()
            parts = _parts(v)
            kinds = set(map(type, parts))
            inner: dict = {}   # id -> [container, how often v holds it]
            if kinds <= _SCALARS:
                leaves = _leaves(parts, kinds)
            else:   # each distinct value once, with its count (C loops: [[]] * 2^24)
                leaves = _Measure()
                counts, distinct = Counter(map(id, parts)), dict(zip(map(id, parts), parts))
                for c_id, count in counts.items():
                    c = distinct[c_id]
                    if isinstance(c, _CONTAINERS):
                        inner[c_id] = [c, count]
                    else:
                        leaves += _leaves([c], {type(c)}).times(count)
            open_parts[key] = (inner, leaves, len(parts))
            stack.append((v, True))
            stack.extend((c, False) for c, _ in inner.values())
            continue
        inner, m, n = open_parts.pop(key)
        for c, count in inner.values():
            k = measured[id(c)][1]
            m += _Measure(k.items, k.text, k.lines, k.depths + k.lines, k.spaces).times(count)
        own = len(v) if hasattr(v, "__len__") else 1
        keys = own if isinstance(v, dict) else 0   # a JSON key is on its value's line
        m = _Measure(m.items + own, m.text + 20 + 4 * n, m.lines + 1 + bool(n) - keys, m.depths - keys,
                     m.spaces + isinstance(v, jinja2.utils.Namespace))
        if m.items > MAX_PROMPT_CHARS:
            _refuse(f"a value of {m.items} items and characters (nested lists, dicts and namespaces counted "
                    f"through) is larger than chat templates make (at most {MAX_PROMPT_CHARS})")
        measured[key] = (v, m)   # v held: its id stays its own while the walk runs
    return measured[id(value)][1]


def _sized(value):
    """A value that may become text, be compared or hashed (written, joined, handed to a filter, a call or an
    operator): no more than MAX_PROMPT_CHARS items through all it holds (_measure)."""
    if isinstance(value, _CONTAINERS):
        _measure(value)
    return value


def _text_bound(value, quoted: bool = False) -> int:
    """At least len(str(value)) (len(repr(value)) if quoted), found without making it (_Measure.text)."""
    if isinstance(value, _CONTAINERS):
        return _measure(value).text
    if quoted or isinstance(value, (int, float)):
        return _leaves([value], {type(value)}).text
    return len(str(value))


def _made(value):
    """A value a call, filter, operator or literal made: no longer than a prompt, and what it holds, walked through
    (_sized), no more than a prompt either. So no value a template holds expands past MAX_PROMPT_CHARS, and what
    walks one (str, ==, in, hash, repr) is bounded: `ns.x == ns.y` of two lists doubled 40 times compared 2^40
    pairs, `{(ns.t, ns.t): 1}` hashed 2^40 tuples."""
    if isinstance(value, (bytes, bytearray)):
        _refuse("a chat template made bytes; chat templates make text")
    if isinstance(value, int) and not isinstance(value, bool):
        _bits(value, "an int")   # int.from_bytes, the int filter: // and % are quadratic past this
    if isinstance(value, (str, list, tuple, dict)):
        _size(len(value), "a value")
        _charge(len(value))
    return _sized(value)


def _bits(n: int, what: str) -> None:
    if n.bit_length() > MAX_POWER_BITS:
        _refuse(f"{what} of {n.bit_length()} bits is larger than chat templates compute (at most {MAX_POWER_BITS})")


def _scan(n: int, what: str) -> None:
    """Work done inside one C call that is more than linear in its input, refused past MAX_SCAN steps."""
    if n > MAX_SCAN:
        _refuse(f"{what} would take {n} steps in one call, past the {MAX_SCAN} chat templates run")


def _width(n, what: str) -> None:
    """A width, count or fill that sizes what a call makes before it is made."""
    if isinstance(n, int) and not isinstance(n, bool):
        _size(n, what)


def _spec_number(fmt: str, i: int) -> tuple:
    """A printf width or precision at fmt[i]: ('*', digits or None, the index after it)."""
    if i < len(fmt) and fmt[i] == "*":
        return "*", i + 1
    j = i
    while j < len(fmt) and fmt[j].isdigit():
        j += 1
    return fmt[i:j] or None, j


def _printf_conversions(fmt: str):
    """The conversions of `fmt % ...` as CPython reads them: (key or None, width, precision, type), width and
    precision '*', digits or None; a mapping key may hold balanced parentheses ('%(a(b)c)s' is key 'a(b)c')."""
    i, n = 0, len(fmt)
    while (i := fmt.find("%", i) + 1) and i < n:
        if fmt[i] == "%":
            i += 1
            continue
        key = None
        if fmt[i] == "(":
            depth, start = 1, i + 1
            while depth and i + 1 < n:
                i += 1
                depth += {"(": 1, ")": -1}.get(fmt[i], 0)
            key, i = fmt[start:i], i + 1
        while i < n and fmt[i] in _PRINTF_FLAGS:
            i += 1
        width, i = _spec_number(fmt, i)
        precision = None
        if i < n and fmt[i] == ".":
            precision, i = _spec_number(fmt, i + 1)
        while i < n and fmt[i] in "hlL":
            i += 1
        if i < n:
            yield key, width, precision, fmt[i]
            i += 1


def _printf(fmt: str, values) -> None:
    """`fmt % values`, refused before it runs where its text could be longer than a prompt: each conversion's width
    and precision (written, or '*' from values; each at most a prompt) plus the text of the value it formats (a
    mapping key's value as often as the key is named), added up with the format's own length."""
    positional = list(values) if isinstance(values, tuple) else [values]
    taken, total = 0, len(fmt)
    for count, (key, width, precision, kind) in enumerate(_printf_conversions(fmt)):
        if count % 65536 == 65535:
            _tick()
        extra = 0
        for spec, what in ((width, "width"), (precision, "precision")):
            if spec == "*":
                v = positional[taken] if taken < len(positional) else None
                taken += 1
                _width(v, f"a '*' {what}")
                extra += abs(v) if isinstance(v, int) else 0
            elif spec:
                _size(int(spec), f"a printf {what}")
                extra += int(spec) if what == "width" or kind not in "sra" else 0
        if key is not None:
            v = values.get(key) if isinstance(values, Mapping) else None
        elif isinstance(values, tuple):
            v = positional[taken] if taken < len(positional) else None
            taken += 1
        else:
            v = values
        total += extra + 8 + (1 if kind == "c" else _text_bound(v, kind in "ra"))
    _size(total, "a printf")


class _BudgetFormatter:
    """A string.Formatter that checks each field's spec before it formats the field (its widths and precisions,
    nested fields '{0:{1}}' filled in, at most a prompt) and adds up the fields' text as it is made, within a
    prompt: one argument named n times ('{0}' * n) or n fields of a wide spec made n times their text before."""

    made = 0

    def format_field(self, value, format_spec):
        for digits in _DIGITS.findall(format_spec):   # nested fields ('{0:{1}}') are filled in by now
            _size(int(digits), "a format width or precision")
        text = super().format_field(value, format_spec)
        self.made += len(text)
        _size(self.made, "a format's fields")
        return text


class _BoundedFormatter(_BudgetFormatter, SandboxedFormatter):
    pass


class _BoundedEscapeFormatter(_BudgetFormatter, SandboxedEscapeFormatter):
    pass


def _joined(sep: str, items) -> list:
    """items (materialized) whose str()s joined by sep fit a prompt."""
    items = _sized(list(items))
    _size(sum(len(str(x)) for x in items) + len(sep) * max(len(items) - 1, 0), "a join")
    return items


def _replaced(s, old, new, count) -> None:
    s, old, new = str(s), str(old), str(new)
    n = (s.count(old) if old else len(s) + 1)
    if isinstance(count, int) and not isinstance(count, bool) and count >= 0:
        n = min(n, count)
    _size(len(s) + n * (len(new) - len(old)), "a replace")


def _str_method(obj, args: tuple, kwargs) -> tuple:
    """What a str method would make, from its arguments, before it runs; returns the arguments to run it with
    (join's iterable read once, into a list, to be measured)."""
    if getattr(obj, "__name__", "") in _BYTES_METHODS and isinstance(getattr(obj, "__self__", None), (str, int)):
        _refuse(f"{obj.__name__}() makes bytes, which chat templates do not make")
    if not isinstance(getattr(obj, "__self__", None), str):
        return args
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
    elif name == "translate" and args and isinstance(args[0], (dict, list, tuple)):   # a table maps or indexes
        table = args[0].values() if isinstance(args[0], dict) else args[0]
        longest = max((len(v) for v in table if isinstance(v, str)), default=1)
        _size(len(s) * max(longest, 1), "a translate")
    elif name == "join" and len(args) == 1:
        return (_joined(s, args[0]),)
    elif name in ("strip", "lstrip", "rstrip") and args and isinstance(args[0], str):   # each character stripped
        _scan(len(s) * len(args[0]), f"{name}'s characters")                               # searches all of chars
    elif name in ("rfind", "rindex", "rsplit", "rpartition") and args and isinstance(args[0], str):
        _scan((len(s) - len(args[0])) * len(args[0]), f"{name}'s reverse search")   # (n - m) x m in CPython 3.11
    return args


def _check_filter(name: str, args: list, kwargs: dict) -> None:
    """What a filter would make, from its arguments (the filtered value first), before it runs."""
    def arg(i, key, default=None):
        return args[i] if len(args) > i else kwargs.get(key, default)

    def unit(v) -> int:   # the length of an int (a count of spaces) or str argument
        return v if isinstance(v, int) and not isinstance(v, bool) else len(v) if isinstance(v, str) else 0

    if name == "center":
        _width(arg(1, "width"), "a center width")
    elif name == "indent":   # each line (the first and blank ones too with first / blank) gets the width
        width, text = arg(1, "width"), str(args[0])
        _width(width, "an indent width")
        _size(max(unit(width), 0) * (text.count("\n") + 1) + len(text), "an indent")
    elif name == "trim" and isinstance(arg(1, "chars"), str):
        _scan(len(str(args[0])) * len(arg(1, "chars")), "trim's characters")
    elif name in _ORDERING and hasattr(args[0], "__len__") and len(args[0]) > MAX_ORDERED_ITEMS:
        _refuse(f"{name} of {len(args[0])} items is more than chat templates order in one call (at most "
                f"{MAX_ORDERED_ITEMS})")
    elif name == "round":   # 10 ** precision, made in full for an int or with method ceil / floor
        precision = arg(1, "precision", 0)
        if isinstance(precision, int) and abs(precision) > MAX_ROUND_DIGITS:
            _refuse(f"round to {precision} digits is past the {MAX_ROUND_DIGITS} chat templates compute")
    elif name == "tojson" and isinstance(args[0], _CONTAINERS):   # chat_template's (value, ensure_ascii, indent,
        indent, separators = arg(2, "indent"), arg(3, "separators")   # separators, sort_keys)
        step = indent if isinstance(indent, int) and not isinstance(indent, bool) else len(str(indent or ""))
        m = _measure(args[0])
        if step:   # each item and closing bracket is a line indented `step` per level it is nested
            _size(max(step, 0) * m.depths, "a tojson indentation")
        if isinstance(separators, (list, tuple)):   # an item separator after each item, a key one after each key
            _size(m.lines * sum(len(str(x)) for x in separators), "a tojson's separators")
    elif name in ("slice", "batch"):
        n = arg(1, "slices" if name == "slice" else "linecount")
        if isinstance(n, int) and not isinstance(n, bool) and n > MAX_RANGE_ITEMS:
            _refuse(f"{name}({n}) makes more than {MAX_RANGE_ITEMS} lists")
    elif name == "format" and args:   # jinja's: value % (kwargs or args)
        _printf(str(args[0]), kwargs or tuple(args[1:]))
    elif name == "replace" and len(args) >= 3:
        _replaced(args[0], args[1], args[2], arg(3, "count", -1))
    elif name == "urlencode" and args:
        _size(_quoted_bound(args[0]), "a urlencode")


def _quoted_bound(value) -> int:
    """At least len(urlencode(value)): 3 characters a UTF-8 byte (%XX) and 2 an item (= and &). Checked before it
    runs: quoting builds a list of one string a byte (a non-BMP character 4 of them), 200 million characters and a
    gigabyte in one call for a prompt-sized text."""
    def quoted(v) -> int:
        return 3 * len(str(v).encode("utf-8", "surrogatepass"))
    if isinstance(value, str) or not isinstance(value, (dict, list, tuple)):
        return quoted(value)
    items = value.items() if isinstance(value, dict) else value
    return sum(quoted(k) + quoted(v) + 2 for k, v in (p for p in items if isinstance(p, (list, tuple)) and len(p) == 2))


def _written(value):
    """What `{{ ... }}` writes, before it is made text."""
    _tick()
    return _sized(value)


def _steps(items):
    """A `for` loop's items, each a tick of the render's time limit."""
    for item in items:
        _tick()
        yield item


def _counted(items):
    """A filter's generator (map, select, unique, batch, ...) read through: its items, measured as they are read
    and added up, at most MAX_PROMPT_CHARS. Each item alone was bounded where it was made, but a consumer that
    holds them all (list, join, sort, dict) held n of them before it could check: `range(1000)|map('center',
    10**7)|list` made 10^10 characters."""
    total = 0
    for item in items:
        _tick()
        total += len(item) if isinstance(item, str) else _measure(item).items if isinstance(item, _CONTAINERS) else 1
        if total > MAX_PROMPT_CHARS:
            _refuse(f"a filter's items of {total} characters and items so far are more than chat templates make "
                    f"(at most {MAX_PROMPT_CHARS})")
        yield item


def bounded_filter(name: str, f):
    """A filter that ticks the time limit, checks what it would make before and what it made after."""
    skip = 1 if _PassArg.from_obj(f) is not None else 0

    @functools.wraps(f)
    def run(*args, **kwargs):
        _tick()
        args = list(args)
        for v in (*args[skip:], *kwargs.values()):
            _sized(v)
        if name in _ORDERING and len(args) > skip and isinstance(args[skip], types.GeneratorType):
            args[skip] = list(args[skip])   # its items counted as read (_counted); its length checked below
        if name == "join" and len(args) > skip:   # an iterator is read once: check the items, join those
            sep = args[skip + 1] if len(args) > skip + 1 else kwargs.get("d", "")
            args[skip] = _joined(str(sep), args[skip])
        _check_filter(name, args[skip:], kwargs)
        made = _made(f(*args, **kwargs))
        return _counted(made) if isinstance(made, types.GeneratorType) else made
    return run


def _not_offered(name: str):
    def refuse(*args, **kwargs):
        _refuse(f"the {name} filter is not offered to chat templates: it {_UNBOUNDED_FILTERS[name]}")
    return refuse


def settable(value):
    """A value a namespace attribute may be set to: measured, and holding no namespace (a namespace inside
    another, or in a list one holds, would let what holds it grow after it was measured: a chain linked from its
    head, a tree grown from its root)."""
    if isinstance(value, jinja2.utils.Namespace) or (isinstance(value, _CONTAINERS) and _measure(value).spaces):
        _refuse("a namespace attribute cannot hold a namespace in chat templates")
    return value


def _sequence_sum(numeric_sum):
    """jinja's `sum`, whose list or tuple `start` concatenates: each step copies the total so far (n lists are
    n^2 / 2 copies: 5 million one-item lists ran for hours, unchecked inside Python's sum), so it adds one item at
    a time, each a tick of the time limit; numbers keep Python's sum (its float rounding)."""
    @jinja2.pass_environment
    def total(environment, iterable, attribute=None, start=0):
        if not isinstance(start, (list, tuple)):
            return numeric_sum(environment, iterable, attribute=attribute, start=start)
        if attribute is not None:
            iterable = map(jinja2.filters.make_attrgetter(environment, attribute), iterable)
        result = start
        for item in iterable:   # the result is no larger than the items and start, which were sized
            _tick()
            result = result + item
        return result
    return total


_TITLE_SEPARATOR = re.compile(r"[-\s({\[<]")   # where jinja's title starts a word: its case is its own
_TITLE_CHUNK = 1 << 16


def _title(s) -> str:
    """jinja's `title`, a chunk of about _TITLE_CHUNK characters at a time, each cut at a separator: jinja's splits
    the whole text into a list of pieces and makes another of their results, 1.6 GB for 5.5 million short words.
    The same text: a piece is capitalized on its own, and a separator cut in two is two pieces whose first letter
    has no upper case."""
    s, parts, i = jinja2.filters.soft_str(s), [], 0
    while i < len(s):
        _tick()
        cut = _TITLE_SEPARATOR.search(s, i + _TITLE_CHUNK)
        j = cut.start() if cut else len(s)
        parts.append(jinja2.filters.do_title(s[i:j]))
        i = j
    return "".join(parts)


def _lipsum(n=5, html=True, min=20, max=100):  # noqa: A002 - jinja's names
    n, min, max = (operator.index(v) for v in (n, min, max))   # a float count (30000000.0) was not checked
    for v in (n, min, max):
        _width(v, "a lipsum count")
    if all(isinstance(v, int) for v in (n, min, max)) and n * builtins.max(min, max, 1) > MAX_RANGE_ITEMS:
        _refuse(f"lipsum(n={n}, max={max}) makes more than {MAX_RANGE_ITEMS} words")
    return jinja2.utils.generate_lorem_ipsum(n=n, html=html, min=min, max=max)


class _Generator(CodeGenerator):
    """jinja's code generator with each `for` loop's items counted against the render's time limit (a loop whose
    body writes nothing and calls nothing checked nothing), `~` joined through the size check and each list, tuple
    and dict literal sized as it is made (`[ns.x, ns.x]` in a loop doubles what it holds)."""

    def visit_Template(self, node, frame=None):
        for loop in node.find_all(nodes.For):
            loop.iter = nodes.Filter(loop.iter, "wgraph.steps", [], [], None, None, lineno=loop.lineno)
        super().visit_Template(node, frame)

    def _made(self, visit, node, frame):
        """A literal or slice through BoundedEnvironment.wgraph_made (not one assigned to)."""
        if getattr(node, "ctx", "load") != "load":   # List and Dict have no ctx
            return visit(node, frame)
        self.write("environment.wgraph_made(")
        visit(node, frame)
        self.write(")")

    def visit_Getitem(self, node, frame):
        """A slice (`x[1:]`, which jinja writes as Python, not through getitem) is a new value: made, charged."""
        if isinstance(node.arg, nodes.Slice):
            self._made(super().visit_Getitem, node, frame)
        else:
            super().visit_Getitem(node, frame)

    def visit_List(self, node, frame):
        self._made(super().visit_List, node, frame)

    def visit_Tuple(self, node, frame):
        self._made(super().visit_Tuple, node, frame)

    def visit_Dict(self, node, frame):
        self._made(super().visit_Dict, node, frame)

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


class BoundedEnvironment(ImmutableSandboxedEnvironment):
    """The sandbox with `**`, `*`, `+` and `%` checked before they run (intercepted operators are never
    constant-folded at compile time either): a power's or product's result at most MAX_POWER_BITS bits, a repeated
    or concatenated string or list, or a printf's text, at most MAX_PROMPT_CHARS; every call, filter, `~`,
    attribute and loop item ticks the render's time limit, and what a call or filter makes is checked (see
    _str_method, _check_filter, _made). `{{ ... }}` writes through finalize; a filter added later goes through
    bounded_filter."""

    intercepted_binops = frozenset({"**", "*", "+", "-", "//", "/", "%"})   # never folded at compile either
    code_generator_class = _Generator

    def __init__(self, *args, **kwargs):
        super().__init__(*args, finalize=_written, **kwargs)
        self.filters["sum"] = _sequence_sum(self.filters["sum"])
        self.filters["title"] = _title
        self.filters = {name: bounded_filter(name, f) for name, f in self.filters.items()}
        self.filters.update({name: _not_offered(name) for name in _UNBOUNDED_FILTERS})
        self.filters["wgraph.steps"] = _steps   # no template can name it: it is not an identifier
        self.globals["lipsum"] = _lipsum

    @staticmethod
    def concat(parts):
        """The text of a macro, a {% set %} block or a call block: sized before it is joined."""
        parts = list(parts)
        length = sum(map(len, parts))
        _size(length, "a block's text")
        _charge(length)
        return "".join(parts)

    @staticmethod
    def wgraph_made(value):
        _tick()
        return _made(value)

    @staticmethod
    def wgraph_concat(join, values):
        _tick()
        for v in values:
            _sized(v)
        _size(sum(len(str(v)) for v in values), "a '~' concatenation")
        made = join(values)
        _charge(len(made))
        return made

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
        args = _str_method(__obj, args, kwargs)
        return _made(super().call(__context, __obj, *args, **kwargs))

    def wrap_str_format(self, value):
        """A str's format / format_map, as jinja's sandbox wraps it (fields read through getattr / getitem), with
        each field's spec checked before it is formatted and the fields' text added up as made (_BudgetFormatter)."""
        if super().wrap_str_format(value) is None:
            return None
        fmt, is_map = value.__self__, value.__name__ == "format_map"

        @functools.wraps(value)
        def checked(*args, **kwargs):
            if is_map:
                if kwargs or len(args) != 1:
                    raise TypeError("format_map() takes exactly one argument and no keywords")
                args, kwargs = (), args[0]
            formatter = (_BoundedEscapeFormatter(self, escape=fmt.escape) if isinstance(fmt, Markup)
                         else _BoundedFormatter(self))
            return _made(type(fmt)(formatter.vformat(fmt, args, kwargs)))
        return checked

    def call_binop(self, context, operator, left, right):
        _tick()
        if operator in "+-" and all(isinstance(v, int) for v in (left, right)):   # 2n as n + n or n - (0 - n)
            _bits(max(abs(left), abs(right)) * 2, f"a '{operator}' result")
        if operator in ("//", "/", "%") and all(isinstance(v, int) for v in (left, right)):   # quadratic in bits:
            _bits(max(abs(left), abs(right)), f"a '{operator}' operand")   # a 0x... literal of 10^6 digits
        if operator in "*+" and (isinstance(left, (bytes, bytearray)) or isinstance(right, (bytes, bytearray))):
            _refuse("a chat template made bytes; chat templates make text")
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
            _refuse(f"{left} ** {right} is larger than chat templates compute")
        if operator == "*":
            for seq, n in ((left, right), (right, left)):
                if isinstance(seq, (str, list, tuple)) and isinstance(n, int) and len(seq) * n > MAX_PROMPT_CHARS:
                    _refuse(f"a repetition of {len(seq) * n} items is longer than chat templates make")
        return _made(super().call_binop(context, operator, left, right))


class RangeBudget:
    """range() for one render: at most MAX_RANGE_ITEMS items in all its calls (jinja's sandbox caps one call)."""

    def __init__(self):
        self.left = MAX_RANGE_ITEMS

    def __call__(self, *args):
        r = range(*args)
        self.left -= len(r)
        if self.left < 0:
            _refuse(f"range() made more than {MAX_RANGE_ITEMS} items in one render")
        return r
